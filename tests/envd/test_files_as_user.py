"""/files and the filesystem RPCs act as the request user, on regular files only.

hangar-envd runs as root here, as it does in a sandbox, and every request
names the unprivileged user `user`. Each test is an attack a sandbox program
could make by planting links or special files where the daemon goes: none
may reach what `user` could not reach from a shell, change a file's owner,
or stream a device, FIFO, socket or /proc entry.
"""

import http.client
import json
import os
import pwd
import secrets
import shutil
import socket
import stat
import subprocess
import tempfile
import urllib.parse

import pytest

from envdwire import basic_user, end_error

USER = "user"


def _user():
    try:
        return pwd.getpwnam(USER)
    except KeyError:
        return None


pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root: hangar-envd only acts as other users as root"),
    pytest.mark.skipif(_user() is None, reason=f"needs the Unix user '{USER}' (./dev creates it)"),
]


@pytest.fixture
def tree():
    """/tmp/X (0755, root) holding mine/ (the user's), closed/ (root, 0700) and shared/ (root, 0755)."""
    pw = _user()
    base = tempfile.mkdtemp(prefix="envd-as-user-", dir="/tmp")
    os.chmod(base, 0o755)
    dirs = {"base": base}
    for name, mode, owner in (("mine", 0o755, pw), ("closed", 0o700, None), ("shared", 0o755, None)):
        p = os.path.join(base, name)
        os.mkdir(p)
        os.chmod(p, mode)
        if owner:
            os.chown(p, owner.pw_uid, owner.pw_gid)
        dirs[name] = p
    dirs["uid"] = pw.pw_uid
    yield dirs
    shutil.rmtree(base, ignore_errors=True)


def files_url(path, user=USER):
    return "/files?" + urllib.parse.urlencode({"path": path, "username": user})


def upload(client, path, data, user=USER, timeout=10):
    return client.request("POST", files_url(path, user), body=data,
                          headers={"Content-Type": "application/octet-stream"}, timeout=timeout)


def download_head(envd, path, user=USER, limit=1 << 20, timeout=10):
    """GET /files, reading at most limit bytes of the body: (status, body)."""
    conn = http.client.HTTPConnection("127.0.0.1", envd.port, timeout=timeout)
    try:
        conn.request("GET", files_url(path, user))
        r = conn.getresponse()
        return r.status, r.read(limit)
    finally:
        conn.close()


def rpc(client, method, msg, user=USER):
    return client.unary(f"/filesystem.Filesystem/{method}", msg, headers={"Authorization": basic_user(user)})


def write(path, data, mode=0o644):
    with open(path, "wb") as f:
        f.write(data)
    os.chmod(path, mode)


# ---- uploads ---------------------------------------------------------------------------


def test_upload_through_a_link_to_a_socket_leaves_the_socket_alone(envd, tree):
    """The attack that handed envd's own socket to the sandbox user."""
    sock_path = os.path.join(tree["closed"], "envd.sock")
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.bind(sock_path)
        os.chmod(sock_path, 0o600)
        link = os.path.join(tree["mine"], "link")
        os.symlink(sock_path, link)
        r = upload(envd.client, link, b"x")
        assert r.status in (400, 403), r
        st = os.lstat(sock_path)
        assert (st.st_uid, st.st_gid) == (0, 0), "the socket changed owner"
        assert stat.S_ISSOCK(st.st_mode)
    finally:
        s.close()


def test_upload_through_a_link_to_a_root_file_neither_chowns_nor_truncates(envd, tree):
    target = os.path.join(tree["shared"], "config")
    write(target, b"root's content", 0o644)
    link = os.path.join(tree["mine"], "config")
    os.symlink(target, link)
    r = upload(envd.client, link, b"sandbox content")
    assert r.status == 400, r
    assert "symbolic link" in r.json()["message"]
    st = os.stat(target)
    assert st.st_uid == 0
    with open(target, "rb") as f:
        assert f.read() == b"root's content"
    assert os.path.islink(link), "the link itself is left as it was"


def test_upload_through_a_linked_directory_into_a_root_only_directory(envd, tree):
    door = os.path.join(tree["mine"], "door")
    os.symlink(tree["closed"], door)
    r = upload(envd.client, os.path.join(door, "planted"), b"x")
    assert r.status == 403, r
    assert os.listdir(tree["closed"]) == []


def test_upload_into_a_root_only_directory(envd, tree):
    r = upload(envd.client, os.path.join(tree["shared"], "planted"), b"x")
    assert r.status == 403, r
    assert "permission denied" in r.json()["message"]
    r = upload(envd.client, os.path.join(tree["shared"], "sub", "planted"), b"x")
    assert r.status == 403, r
    assert os.listdir(tree["shared"]) == []


def test_upload_to_a_fifo_is_refused_at_once(envd, tree):
    """Opening a FIFO nobody reads would block the connection thread for good."""
    fifo = os.path.join(tree["mine"], "fifo")
    os.mkfifo(fifo)
    os.chown(fifo, tree["uid"], -1)
    r = upload(envd.client, fifo, b"x", timeout=10)
    assert r.status == 400, r
    assert "FIFO" in r.json()["message"]


@pytest.mark.parametrize("user", [USER, "root"])
def test_upload_to_a_device_is_refused(envd, tree, user):
    link = os.path.join(tree["mine"], "null")
    os.symlink("/dev/null", link)
    for path in ("/dev/null", link):
        r = upload(envd.client, path, b"x", user=user)
        assert r.status == 400, (path, r)
    st = os.stat("/dev/null")
    assert (st.st_uid, stat.S_ISCHR(st.st_mode)) == (0, True)


def test_an_existing_file_keeps_its_owner(envd, tree):
    """Writable by the user: written, but not given away (upstream chowns it)."""
    target = os.path.join(tree["mine"], "shared-notes")
    write(target, b"old", 0o666)
    r = upload(envd.client, target, b"new")
    assert r.status == 200, r
    st = os.stat(target)
    assert st.st_uid == 0
    with open(target, "rb") as f:
        assert f.read() == b"new"


def test_what_the_user_uploads_is_theirs(envd, tree):
    p = os.path.join(tree["mine"], "a", "b", "file")
    r = upload(envd.client, p, b"mine")
    assert r.status == 200, r
    for q in (p, os.path.dirname(p), os.path.dirname(os.path.dirname(p))):
        assert os.stat(q).st_uid == tree["uid"], q
    with open(p, "rb") as f:
        assert f.read() == b"mine"


def test_a_set_user_id_file_loses_the_bit_when_the_user_writes_it(envd, tree):
    """Written as root, a writable set-user-ID root file would keep the bit."""
    target = os.path.join(tree["mine"], "tool")
    write(target, b"#!/bin/sh\n", 0o4777)
    os.chmod(target, 0o4777)
    r = upload(envd.client, target, b"#!/bin/sh\nid\n")
    assert r.status == 200, r
    assert not os.stat(target).st_mode & stat.S_ISUID


# ---- downloads -------------------------------------------------------------------------


@pytest.fixture
def root_process():
    """A root process whose environment holds a marker: (pid, marker)."""
    marker = "HANGAR_MARKER_" + secrets.token_hex(8)
    p = subprocess.Popen(["sleep", "300"], env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), marker: "1"})
    yield p.pid, marker
    p.kill()
    p.wait()


def test_download_through_a_link_to_proc_environ(envd, tree, root_process):
    """The attack that returned bwrap's environment to the sandbox user."""
    pid, marker = root_process
    link = os.path.join(tree["mine"], "env")
    os.symlink(f"/proc/{pid}/environ", link)
    for path in (link, f"/proc/{pid}/environ"):
        status, body = download_head(envd, path)
        assert status in (400, 403), (path, status)
        assert marker.encode() not in body


def test_envd_never_serves_its_own_proc_entries(envd, tree):
    """Not even to root: /proc/self is the daemon itself."""
    for user in (USER, "root"):
        for path in ("/proc/self/environ", f"/proc/{envd.proc.pid}/environ", "/proc/self/maps"):
            status, body = download_head(envd, path, user=user)
            # The user may already be refused by the kernel; root only by envd.
            assert status == 400 or (user == USER and status == 403), (user, path, status, body[:200])
            assert b"HANGAR_ENVD" not in body and b"PATH=" not in body


def test_download_of_a_link_to_dev_zero_ends_at_once(envd, tree):
    """It used to stream zeros for ever."""
    link = os.path.join(tree["mine"], "zero")
    os.symlink("/dev/zero", link)
    for user in (USER, "root"):
        status, body = download_head(envd, link, user=user)
        assert status == 400, (user, status, len(body))
        assert "character device" in json.loads(body)["message"]


def test_download_of_fifos_and_sockets_is_refused(envd, tree):
    fifo = os.path.join(tree["mine"], "fifo")
    os.mkfifo(fifo)
    sock_path = os.path.join(tree["mine"], "sock")
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.bind(sock_path)
        for path, kind in ((fifo, "FIFO"), (sock_path, "socket")):
            status, body = download_head(envd, path)
            assert status == 400, (path, status)
            assert kind in json.loads(body)["message"]
    finally:
        s.close()


def test_download_of_a_root_only_file(envd, tree):
    secret = os.path.join(tree["shared"], "secret")
    write(secret, b"root only", 0o600)
    link = os.path.join(tree["mine"], "secret")
    os.symlink(secret, link)
    for path in (secret, link):
        status, body = download_head(envd, path)
        assert status == 403, (path, status)
        assert b"root only" not in body
    status, body = download_head(envd, secret, user="root")
    assert (status, body) == (200, b"root only")


def test_download_of_the_users_own_file_and_through_their_own_link(envd, tree):
    p = os.path.join(tree["mine"], "own")
    write(p, b"hello", 0o600)
    os.chown(p, tree["uid"], -1)
    os.symlink(p, os.path.join(tree["mine"], "own-link"))
    for path in (p, os.path.join(tree["mine"], "own-link")):
        assert download_head(envd, path) == (200, b"hello")


# ---- filesystem RPCs -------------------------------------------------------------------


def test_rpcs_run_with_the_users_rights(envd, tree):
    c = envd.client
    secret = os.path.join(tree["closed"], "secret")
    write(secret, b"s", 0o600)
    root_file = os.path.join(tree["shared"], "keep")
    write(root_file, b"k", 0o644)

    r = rpc(c, "Stat", {"path": secret})
    assert r.status == 403 and r.json()["code"] == "permission_denied", r
    r = rpc(c, "ListDir", {"path": tree["closed"]})
    assert r.status == 403 and r.json()["code"] == "permission_denied", r
    r = rpc(c, "MakeDir", {"path": os.path.join(tree["shared"], "new")})
    assert r.status == 403 and r.json()["code"] == "permission_denied", r
    r = rpc(c, "Remove", {"path": root_file})
    assert r.status == 403 and r.json()["code"] == "permission_denied", r
    r = rpc(c, "Move", {"source": root_file, "destination": os.path.join(tree["mine"], "taken")})
    assert r.status == 403 and r.json()["code"] == "permission_denied", r
    assert os.path.exists(root_file)
    assert sorted(os.listdir(tree["shared"])) == ["keep"]

    # Root, asking the same, may.
    assert rpc(c, "Stat", {"path": secret}, user="root").status == 200


def test_rpcs_do_what_the_user_may(envd, tree):
    c = envd.client
    d = os.path.join(tree["mine"], "x", "y")
    r = rpc(c, "MakeDir", {"path": d})
    assert r.status == 200, r
    assert os.stat(d).st_uid == tree["uid"]
    assert os.stat(os.path.dirname(d)).st_uid == tree["uid"]
    r = rpc(c, "Move", {"source": d, "destination": os.path.join(tree["mine"], "z")})
    assert r.status == 200, r
    r = rpc(c, "ListDir", {"path": tree["mine"], "depth": 2})
    assert r.status == 200, r
    assert sorted(e["name"] for e in r.json()["entries"]) == ["x", "z"]
    r = rpc(c, "Remove", {"path": os.path.join(tree["mine"], "x")})
    assert r.status == 200, r
    assert os.listdir(tree["mine"]) == ["z"]


def test_listing_skips_what_the_user_cannot_open(envd, tree):
    """A closed directory deep in a listing is listed, its contents are not."""
    os.symlink(tree["closed"], os.path.join(tree["mine"], "door"))
    inner = os.path.join(tree["mine"], "inner")
    os.mkdir(inner, 0o700)
    write(os.path.join(inner, "hidden"), b"h", 0o600)
    r = rpc(envd.client, "ListDir", {"path": tree["mine"], "depth": 3})
    assert r.status == 200, r
    names = sorted(e["path"][len(tree["mine"]) + 1:] for e in r.json()["entries"])
    assert names == ["door", "inner"]


def test_watching_a_root_only_directory_is_refused(envd, tree):
    status, envs, _ = envd.client.stream("/filesystem.Filesystem/WatchDir", {"path": tree["closed"]},
                                         headers={"Authorization": basic_user(USER)}, timeout=10)
    assert status == 200
    err = end_error(envs)
    assert err and err["code"] == "permission_denied", envs
