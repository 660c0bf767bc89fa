"""The checkpoint endpoints: GET /hangar/v1/info and GET/PUT /hangar/v1/archive.

A real hangar-envd captures real directories and git repositories into the
checkpoint format (pax tar, zstd) and restores archives into real
directories. Archives are read and built here with Python's tarfile and the
zstd command, independently of libarchive, which the daemon uses. The
hostile archives are the ones a tampered or forged checkpoint could carry;
each must be refused with the member named and the workspace left exactly
as it was.
"""

import hashlib
import io
import json
import os
import pwd
import shutil
import signal
import stat
import subprocess
import tarfile
import tempfile
import urllib.parse

import pytest

from envdwire import ChunkedReader, RawConn, poll, raw_request_bytes

USER = "user"
STAGING = ".hangar-restore-"


def _user():
    try:
        return pwd.getpwnam(USER)
    except KeyError:
        return None


needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="needs git (./dev installs it)")
needs_user = [
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root: hangar-envd only acts as other users as root"),
    pytest.mark.skipif(_user() is None, reason=f"needs the Unix user '{USER}' (./dev creates it)"),
]

if shutil.which("zstd") is None:
    pytest.skip("needs the zstd command (./dev installs it)", allow_module_level=True)


# ---- helpers ------------------------------------------------------------------------


def unzstd(data):
    r = subprocess.run(["zstd", "-dc"], input=data, capture_output=True, check=False)
    assert r.returncode == 0, r.stderr
    return r.stdout


def zstd(data):
    return subprocess.run(["zstd", "-c", "-1", "-q"], input=data, capture_output=True, check=True).stdout


def archive_url(path, **params):
    return "/hangar/v1/archive?" + urllib.parse.urlencode({"path": str(path), **params})


def capture(client, path, **params):
    """GET the archive of path: the Response (body still compressed)."""
    return client.request("GET", archive_url(path, **params), timeout=60)


def members(tar_bytes):
    """[(name, TarInfo, data or None)] in stream order."""
    out = []
    with tarfile.open(fileobj=io.BytesIO(tar_bytes), mode="r:") as t:
        for m in t:
            data = t.extractfile(m).read() if m.isreg() else None
            out.append((m.name, m, data))
    return out


def captured(client, path, **params):
    r = capture(client, path, **params)
    assert r.status == 200, r
    assert r.headers["Content-Type"] == "application/zstd"
    tar_bytes = unzstd(r.body)
    return r, tar_bytes, {name: (m, data) for name, m, data in members(tar_bytes)}


def restore(client, path, body, mode="replace", content_type="application/x-tar", **params):
    return client.request("PUT", archive_url(path, mode=mode, **params), body=body,
                          headers={"Content-Type": content_type}, timeout=60)


def snapshot(root):
    """Everything under root: {relpath: (kind, mode, content or link target, mtime)}."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = os.path.join(dirpath, name)
            rel = os.path.relpath(p, root)
            st = os.lstat(p)
            if stat.S_ISLNK(st.st_mode):
                out[rel] = ("link", None, os.readlink(p), None)
            elif stat.S_ISDIR(st.st_mode):
                out[rel] = ("dir", stat.S_IMODE(st.st_mode), None, None)
            else:
                with open(p, "rb") as f:
                    out[rel] = ("file", stat.S_IMODE(st.st_mode), hashlib.sha256(f.read()).hexdigest(),
                                int(st.st_mtime))
    return out


def staging_dirs(root):
    return [n for n in os.listdir(root) if n.startswith(STAGING)]


def write(path, data, mode=0o644):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())
    os.chmod(path, mode)


def git(cwd, *args):
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(cwd), "GIT_AUTHOR_NAME": "t",
           "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.com"}
    r = subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, check=False)
    assert r.returncode == 0, r.stderr
    return r.stdout.decode()


def make_repo(root):
    """A repository with history, an uncommitted edit, an untracked file, ignored
    directories, a deleted tracked file and a symbolic link."""
    os.makedirs(root, exist_ok=True)
    git(root, "init", "-q", "-b", "main")
    write(os.path.join(root, "README.md"), "first\n")
    write(os.path.join(root, "src/main.c"), "int main(void) { return 0; }\n")
    write(os.path.join(root, "tool.sh"), "#!/bin/sh\n", 0o755)
    write(os.path.join(root, "doomed.txt"), "to be deleted\n")
    write(os.path.join(root, ".gitignore"), "node_modules/\n.venv/\n*.o\n")
    os.symlink("src/main.c", os.path.join(root, "main-link"))
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "one")
    write(os.path.join(root, "src/lib.c"), "int lib;\n")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "two")
    write(os.path.join(root, "README.md"), "first\nedited, not committed\n")
    write(os.path.join(root, "notes/todo.txt"), "untracked, not ignored\n")
    write(os.path.join(root, "node_modules/dep/index.js"), "ignored\n")
    write(os.path.join(root, ".venv/bin/python"), "ignored\n", 0o755)
    write(os.path.join(root, "src/main.o"), "ignored object\n")
    os.unlink(os.path.join(root, "doomed.txt"))
    return root


def tar_of(entries, fmt=tarfile.PAX_FORMAT, end_marker=True):
    """A tar built by hand: entries are (TarInfo, data or None)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=fmt) as t:
        for info, data in entries:
            if data is not None:
                info.size = len(data)
            t.addfile(info, io.BytesIO(data) if data is not None else None)
    raw = buf.getvalue()
    if not end_marker:
        raw = raw[:end_of_members(raw)]
    return raw


def end_of_members(raw):
    """The offset just past the last member's data (where the end marker starts)."""
    end = 0
    with tarfile.open(fileobj=io.BytesIO(raw), mode="r:") as t:
        for m in t:
            end = m.offset_data + (m.size + 511) // 512 * 512
    return end


def info(name, kind=tarfile.REGTYPE, mode=0o644, **kw):
    ti = tarfile.TarInfo(name)
    ti.type = kind
    ti.mode = mode
    ti.mtime = 1_700_000_000
    for k, v in kw.items():
        setattr(ti, k, v)
    return ti


@pytest.fixture
def shared_tmp():
    """A directory under /tmp every user can reach (pytest's own is root's only)."""
    base = tempfile.mkdtemp(prefix="envd-archive-", dir="/tmp")
    os.chmod(base, 0o755)
    yield base
    shutil.rmtree(base, ignore_errors=True)


# ---- info ------------------------------------------------------------------------------


def test_info_announces_the_archive_endpoints(client):
    r = client.request("GET", "/hangar/v1/info")
    assert r.status == 200, r
    assert r.headers["Content-Type"].startswith("application/json")
    assert r.json() == {"archive": 1}


def test_info_and_archive_need_the_token(make_envd, tmp_path):
    d = make_envd(token=True)
    write(str(tmp_path / "ws/a"), "x")
    assert d.client.request("GET", "/hangar/v1/info", token=None).status == 401
    assert d.client.request("GET", "/hangar/v1/info").status == 200
    assert capture(d.client, tmp_path / "ws").status == 200
    r = d.client.request("GET", archive_url(tmp_path / "ws"), token="wrong")
    assert r.status == 401
    before = snapshot(tmp_path / "ws")
    r = d.client.request("PUT", archive_url(tmp_path / "ws", mode="replace"), body=tar_of([]), token=None,
                         headers={"Content-Type": "application/x-tar"})
    assert r.status == 401
    assert snapshot(tmp_path / "ws") == before


def test_unknown_hangar_routes_and_methods(client, tmp_path):
    assert client.request("GET", "/hangar/v1/nothing").status == 404
    assert client.request("POST", archive_url(tmp_path)).status == 405
    assert client.request("DELETE", "/hangar/v1/info").status == 405


# ---- capture ---------------------------------------------------------------------------


@needs_git
def test_capture_of_a_repository_keeps_work_and_history_and_leaves_ignored_paths(client, tmp_path):
    ws = make_repo(str(tmp_path / "ws"))
    r, tar_bytes, got = captured(client, ws)
    assert r.headers["X-Hangar-Selection"] == "git"
    names = set(got)
    # history: the whole .git
    assert ".git/HEAD" in names and ".git/config" in names
    assert any(n.startswith(".git/objects/") for n in names)
    # tracked files as they are now, untracked-not-ignored files, links as links
    assert got["README.md"][1] == b"first\nedited, not committed\n"
    assert got["src/main.c"][1].startswith(b"int main")
    assert got["src/lib.c"][1] == b"int lib;\n"
    assert got["notes/todo.txt"][1] == b"untracked, not ignored\n"
    assert got["tool.sh"][0].mode & 0o777 == 0o755
    link = got["main-link"][0]
    assert link.issym() and link.linkname == "src/main.c"
    # ignored and deleted paths are not there
    for gone in ("node_modules", "node_modules/dep/index.js", ".venv", ".venv/bin/python", "src/main.o",
                 "doomed.txt"):
        assert gone not in names, gone
    # parents before children, each name relative and clean
    seen = set()
    for name, m, _ in members(tar_bytes):
        assert not name.startswith(("/", "./")) and ".." not in name.split("/"), name
        parent = os.path.dirname(name)
        assert parent == "" or parent in seen, f"{name} before its directory"
        seen.add(name)
    # the end-of-archive marker is there
    end = end_of_members(tar_bytes)
    assert len(tar_bytes) >= end + 1024 and tar_bytes[end:end + 1024] == bytes(1024)


@needs_git
def test_select_all_keeps_ignored_paths_of_a_repository(client, tmp_path):
    ws = make_repo(str(tmp_path / "ws"))
    r, _, got = captured(client, ws, select="all")
    assert r.headers["X-Hangar-Selection"] == "all"
    assert "node_modules/dep/index.js" in got and ".venv/bin/python" in got and "src/main.o" in got


def test_a_directory_that_is_no_repository_is_kept_whole(client, tmp_path):
    ws = tmp_path / "plain"
    write(str(ws / "node_modules/dep/index.js"), "kept: no repository here\n")
    write(str(ws / "a.txt"), "a")
    os.makedirs(ws / "empty")
    os.symlink("/etc/passwd", ws / "abs-link")
    os.mkfifo(ws / "fifo")
    r, _, got = captured(client, ws)
    assert r.headers["X-Hangar-Selection"] == "all"
    assert got["node_modules/dep/index.js"][1] == b"kept: no repository here\n"
    assert got["empty"][0].isdir()
    assert got["abs-link"][0].issym() and got["abs-link"][0].linkname == "/etc/passwd"
    assert got["abs-link"][1] is None, "a link is kept as a link, never followed"
    assert "fifo" not in got, "FIFOs are left out"


def test_capture_leaves_staging_areas_out(client, tmp_path):
    ws = tmp_path / "ws"
    write(str(ws / "a"), "a")
    write(str(ws / (STAGING + "abc/x")), "half a restore")
    _, _, got = captured(client, ws)
    assert set(got) == {"a"}


def test_capture_parameters_are_checked(client, tmp_path):
    write(str(tmp_path / "file"), "x")
    assert capture(client, "relative/path").status == 400
    r = capture(client, tmp_path, select="everything")
    assert r.status == 400 and "select" in r.json()["message"]
    r = capture(client, tmp_path / "missing")
    assert r.status == 404 and r.json()["code"] == 404
    assert capture(client, tmp_path / "file").status == 400
    assert capture(client, tmp_path, username="no-such-user").status == 401


@needs_git
def test_a_broken_repository_fails_the_capture_before_the_body(client, tmp_path):
    ws = tmp_path / "ws"
    write(str(ws / "a"), "a")
    os.makedirs(ws / ".git")  # no repository inside
    r = capture(client, ws)
    assert r.status == 500, r
    assert "git" in r.json()["message"]


def _children(pid):
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                out.append(int(d))
    return out


def test_a_capture_that_fails_mid_stream_ends_without_the_final_chunk(envd, tmp_path):
    """A client must see a truncated transfer, never a complete-looking one."""
    ws = tmp_path / "ws"
    write(str(ws / "big"), os.urandom(48 << 20))  # more than the socket and pipe hold
    rc = RawConn(envd.port, timeout=30)
    try:
        rc.send(raw_request_bytes("GET", archive_url(ws), {}, body=None))
        status, headers = rc.read_head()
        assert status == 200 and headers.get("transfer-encoding") == "chunked"
        body = ChunkedReader(rc)
        assert len(body.read(4096)) == 4096
        # The capture child is stuck writing; it dies as a failed read would end it.
        kids = poll(lambda: _children(envd.proc.pid), 10, what="the capture child")
        for k in kids:
            os.kill(k, signal.SIGKILL)
        with pytest.raises(EOFError):
            while body.read(1 << 20):
                pass
        assert not body.done, "the stream ended with the final chunk"
    finally:
        rc.close()


# ---- restore ---------------------------------------------------------------------------


def _tree(root):
    write(os.path.join(root, "a.txt"), "alpha\n")
    write(os.path.join(root, "bin/run"), "#!/bin/sh\necho run\n", 0o755)
    write(os.path.join(root, "private/key"), "secret-ish\n", 0o600)
    write(os.path.join(root, "dir with space/ünïcödé.txt"), "names are bytes\n")
    write(os.path.join(root, "empty.txt"), b"")
    write(os.path.join(root, "blob.bin"), os.urandom(300_000))
    os.makedirs(os.path.join(root, "empty-dir"))
    os.symlink("a.txt", os.path.join(root, "rel-link"))
    os.symlink("/nonexistent/target", os.path.join(root, "dangling"))
    os.chmod(os.path.join(root, "bin"), 0o750)


def test_round_trip_restores_bytes_modes_links_and_times(client, tmp_path):
    src, dst = tmp_path / "src", tmp_path / "dst"
    _tree(str(src))
    os.makedirs(dst)
    r = capture(client, src)
    assert r.status == 200, r
    put = restore(client, dst, r.body, content_type="application/zstd")
    assert put.status == 200, put
    counts = put.json()
    assert counts["files"] == 6 and counts["symlinks"] == 2 and counts["dirs"] == 4, counts
    assert counts["bytes"] == sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(src) for f in fs
                                  if not os.path.islink(os.path.join(d, f)))
    assert snapshot(dst) == snapshot(src)
    assert staging_dirs(dst) == []


@needs_git
def test_round_trip_of_a_repository_keeps_its_state(client, tmp_path):
    src = make_repo(str(tmp_path / "src"))
    dst = tmp_path / "dst"
    os.makedirs(dst)
    r = capture(client, src)
    assert restore(client, dst, r.body, content_type="application/zstd").status == 200
    assert git(dst, "log", "--format=%s") == "two\none\n"
    assert git(dst, "status", "--porcelain") == git(src, "status", "--porcelain").replace("?? node_modules/\n", "")
    assert not os.path.exists(dst / "node_modules")


def _dst_with_extras(dst):
    write(str(dst / "stale.txt"), "not in the archive\n")
    write(str(dst / "a.txt"), "old alpha\n")
    write(str(dst / "bin/old-tool"), "old\n")


def test_replace_removes_what_the_archive_lacks(client, tmp_path):
    src, dst = tmp_path / "src", tmp_path / "dst"
    _tree(str(src))
    _dst_with_extras(dst)
    r = restore(client, dst, unzstd(capture(client, src).body))
    assert r.status == 200, r
    assert snapshot(dst) == snapshot(src)


def test_merge_keeps_what_the_archive_lacks(client, tmp_path):
    src, dst = tmp_path / "src", tmp_path / "dst"
    _tree(str(src))
    _dst_with_extras(dst)
    r = restore(client, dst, unzstd(capture(client, src).body), mode="merge")
    assert r.status == 200, r
    got = snapshot(dst)
    assert (dst / "stale.txt").read_text() == "not in the archive\n"
    assert (dst / "bin/old-tool").read_text() == "old\n"
    assert (dst / "a.txt").read_text() == "alpha\n", "a file in the archive replaces the old one"
    for rel, v in snapshot(src).items():
        if v[0] == "dir":
            assert got[rel][0] == "dir", rel
        else:
            assert got[rel] == v, rel


def test_merge_never_descends_through_a_link_in_the_workspace(client, tmp_path):
    outside, dst = tmp_path / "outside", tmp_path / "dst"
    os.makedirs(outside)
    os.makedirs(dst)
    os.symlink(outside, dst / "sub")
    body = tar_of([(info("sub/", tarfile.DIRTYPE, 0o755), None), (info("sub/f"), b"in the archive")])
    r = restore(client, dst, body, mode="merge")
    assert r.status == 200, r
    assert os.listdir(outside) == []
    assert not os.path.islink(dst / "sub") and (dst / "sub/f").read_bytes() == b"in the archive"


def test_a_zstd_body_of_several_frames(client, tmp_path):
    raw = tar_of([(info("a"), b"A" * 1000), (info("b"), b"B" * 1000)])
    body = zstd(raw[:700]) + zstd(raw[700:])
    r = restore(client, tmp_path, body, content_type="application/zstd")
    assert r.status == 200, r
    assert (tmp_path / "a").read_bytes() == b"A" * 1000 and (tmp_path / "b").read_bytes() == b"B" * 1000


def test_restore_parameters_are_checked(client, tmp_path):
    body = tar_of([(info("a"), b"a")])
    assert restore(client, tmp_path, body, mode="overwrite").status == 400
    assert client.request("PUT", archive_url(tmp_path), body=body,
                          headers={"Content-Type": "application/x-tar"}).status == 400
    assert restore(client, tmp_path, body, content_type="application/zip").status == 400
    assert restore(client, "relative", body).status == 400
    assert restore(client, tmp_path / "missing", body).status == 404
    assert restore(client, tmp_path, b"this is not a tar archive" * 40).status == 400
    assert restore(client, tmp_path, b"\x28\xb5\x2f\xfd garbage", content_type="application/zstd").status == 400
    assert os.listdir(tmp_path) == []


# ---- hostile archives ------------------------------------------------------------------

LONG_NAME = "/".join(["d" * 200] * 21) + "/f"  # 4,223 bytes


def _caps_info():
    ti = info("capped", mode=0o755)
    ti.pax_headers = {"SCHILY.xattr.security.capability": "\x01\x00\x00\x02\x00\x30\x00\x00\x00\x00\x00\x00"}
    return ti


HOSTILE = {
    "dotdot": ([(info("../escaped"), b"x")], "../escaped"),
    "dotdot-inside": ([(info("a/../../escaped"), b"x")], "a/../../escaped"),
    "absolute": ([(info("/tmp/envd-archive-absolute"), b"x")], "/tmp/envd-archive-absolute"),
    "through-symlink": ([(info("door", tarfile.SYMTYPE, 0o777, linkname="{outside}"), None),
                         (info("door/planted"), b"x")], "door/planted"),
    "hard-link": ([(info("a"), b"x"), (info("hl", tarfile.LNKTYPE, linkname="a"), None)], "hl"),
    "char-device": ([(info("null", tarfile.CHRTYPE, devmajor=1, devminor=3), None)], "null"),
    "block-device": ([(info("disk", tarfile.BLKTYPE, devmajor=8, devminor=0), None)], "disk"),
    "fifo": ([(info("pipe", tarfile.FIFOTYPE), None)], "pipe"),
    "setuid": ([(info("suid", mode=0o4755), b"#!/bin/sh\n")], "suid"),
    "setgid": ([(info("sgid", mode=0o2755), b"#!/bin/sh\n")], "sgid"),
    "capabilities": ([(_caps_info(), b"\x7fELF")], "capped"),
    "oversize-name": ([(info(LONG_NAME), b"x")], "dddd"),
    "reserved-name": ([(info(STAGING + "x/y"), b"x")], STAGING + "x/y"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_archives_are_refused_and_change_nothing(client, tmp_path, case):
    entries, named = HOSTILE[case]
    outside, ws = tmp_path / "outside", tmp_path / "ws"
    os.makedirs(outside)
    write(str(ws / "keep.txt"), "untouched\n")
    for ti, _ in entries:
        if ti.linkname == "{outside}":
            ti.linkname = str(outside)
    # A valid member first, so the refusal comes after extraction began.
    body = tar_of([(info("first.txt"), b"first")] + entries)
    before = snapshot(ws)
    for mode in ("replace", "merge"):
        r = restore(client, ws, body, mode=mode)
        assert r.status == 400, (mode, r)
        msg = r.json()["message"]
        assert msg.startswith("member \"") and named in msg, msg
        assert snapshot(ws) == before
        assert os.listdir(outside) == []
    assert not os.path.exists("/tmp/envd-archive-absolute")
    assert not os.path.exists(tmp_path / "escaped")


def test_a_tar_without_its_end_marker_is_truncated(client, tmp_path):
    write(str(tmp_path / "keep.txt"), "untouched\n")
    before = snapshot(tmp_path)
    body = tar_of([(info("a"), b"a"), (info("b"), b"b" * 1000)], end_marker=False)
    r = restore(client, tmp_path, body)
    assert r.status == 400 and "truncated" in r.json()["message"], r
    assert snapshot(tmp_path) == before
    # the same bytes with the marker go in
    assert restore(client, tmp_path, body + bytes(1024), mode="merge").status == 200
    assert (tmp_path / "b").read_bytes() == b"b" * 1000


def test_a_tar_cut_after_an_extended_header_is_truncated(client, tmp_path):
    long = "x" * 300
    raw = tar_of([(info("a"), b"a"), (info(long), b"long")])
    # cut just before the member's own header: the pax header and its data stay
    with tarfile.open(fileobj=io.BytesIO(raw), mode="r:") as t:
        last = t.getmembers()[-1]
    assert last.offset_data - 512 > last.offset, "the long name needs an extended header"
    body = raw[:last.offset_data - 512]
    r = restore(client, tmp_path, body)
    assert r.status == 400, r
    assert not os.path.exists(tmp_path / "a") and staging_dirs(tmp_path) == []


def test_a_truncated_zstd_stream_is_refused(client, tmp_path):
    body = zstd(tar_of([(info("a"), b"a" * 100_000)]))
    r = restore(client, tmp_path, body[:-10], content_type="application/zstd")
    assert r.status == 400, r
    assert os.listdir(tmp_path) == []


def test_stale_staging_directories_go_at_the_next_restore(client, tmp_path):
    write(str(tmp_path / (STAGING + "crashed/half")), "left by a crash")
    r = restore(client, tmp_path, tar_of([(info("a"), b"a")]), mode="merge")
    assert r.status == 200, r
    assert sorted(os.listdir(tmp_path)) == ["a"]


def _start_put(envd, path, length, mode="replace"):
    rc = RawConn(envd.port, timeout=30)
    rc.send(raw_request_bytes("PUT", archive_url(path, mode=mode),
                              {"Content-Type": "application/x-tar", "Content-Length": str(length)}, body=None))
    return rc


@pytest.mark.parametrize("whole_archive", [False, True], ids=["mid-archive", "after-the-end-marker"])
def test_a_client_that_breaks_off_leaves_the_workspace_unchanged(envd, tmp_path, whole_archive):
    ws = tmp_path / "ws"
    write(str(ws / "keep.txt"), "untouched\n")
    before = snapshot(ws)
    raw = tar_of([(info("a"), b"a" * 100_000), (info("b"), b"b" * 100_000)])
    part = raw if whole_archive else raw[:150_000]
    rc = _start_put(envd, ws, len(raw) + 4096)  # promises more than it sends
    try:
        rc.send(part)
        # extraction has begun: the staging directory exists
        poll(lambda: staging_dirs(ws), 10, what="the staging directory")
        if whole_archive:
            # everything is extracted and waits for the body's end
            poll(lambda: any(os.path.exists(ws / s / "b") and os.path.getsize(ws / s / "b") == 100_000
                             for s in staging_dirs(ws)), 10, what="the extraction")
    finally:
        rc.abort()
    poll(lambda: not staging_dirs(ws), 10, what="the staging directory to go")
    assert snapshot(ws) == before


# ---- as an unprivileged user -----------------------------------------------------------


@pytest.fixture
def as_user():
    for mark in needs_user:
        if mark.args[0]:
            pytest.skip(mark.kwargs["reason"])
    return _user()


@pytest.mark.parametrize("mode", ["replace", "merge"])
def test_user_cannot_restore_where_they_cannot_write(envd, shared_tmp, as_user, mode):
    ws = os.path.join(shared_tmp, "root-owned")
    write(os.path.join(ws, "root-file"), "root's\n")
    os.chmod(ws, 0o755)
    before = snapshot(ws)
    r = restore(envd.client, ws, tar_of([(info("planted"), b"x")]), mode=mode, username=USER)
    assert r.status in (400, 403), r
    assert snapshot(ws) == before and staging_dirs(ws) == []


def _users_dir(base, name="ws"):
    pw = _user()
    p = os.path.join(base, name)
    os.makedirs(p)
    os.chown(p, pw.pw_uid, pw.pw_gid)
    return p


def test_user_capture_fails_on_a_file_they_cannot_read(envd, shared_tmp, as_user):
    ws = _users_dir(shared_tmp)
    write(os.path.join(ws, "mine.txt"), "mine\n")
    os.chown(os.path.join(ws, "mine.txt"), as_user.pw_uid, as_user.pw_gid)
    write(os.path.join(ws, "sub/root-only"), "root only\n", 0o600)
    r = capture(envd.client, ws, username=USER)
    assert r.status == 403, r
    assert "sub/root-only" in r.json()["message"]
    assert b"root only" not in r.body
    # root may
    assert capture(envd.client, ws, username="root").status == 200


def test_user_capture_fails_on_a_directory_they_cannot_list(envd, shared_tmp, as_user):
    ws = _users_dir(shared_tmp)
    write(os.path.join(ws, "closed/inside"), "hidden\n")
    os.chmod(os.path.join(ws, "closed"), 0o700)
    r = capture(envd.client, ws, username=USER)
    assert r.status == 403 and "closed" in r.json()["message"], r


def test_user_capture_keeps_a_link_to_root_files_as_a_link(envd, shared_tmp, as_user):
    secret = os.path.join(shared_tmp, "secret")
    write(secret, "root only\n", 0o600)
    ws = _users_dir(shared_tmp)
    os.symlink(secret, os.path.join(ws, "peek"))
    r = capture(envd.client, ws, username=USER)
    assert r.status == 200, r
    tar_bytes = unzstd(r.body)
    assert b"root only" not in tar_bytes
    (name, m, data), = members(tar_bytes)
    assert name == "peek" and m.issym() and m.linkname == secret


def test_a_workspace_path_planted_to_point_at_root(envd, shared_tmp, as_user):
    ws = _users_dir(shared_tmp)
    os.symlink("/root", os.path.join(ws, "door"))
    r = capture(envd.client, os.path.join(ws, "door"), username=USER)
    assert r.status == 403, r
    # a root-only directory reached through the user's link: nothing read, nothing written
    closed = os.path.join(shared_tmp, "closed")
    write(os.path.join(closed, "secret"), "root only\n", 0o600)
    os.chmod(closed, 0o700)
    os.symlink(closed, os.path.join(ws, "door2"))
    before = snapshot(closed)
    r = capture(envd.client, os.path.join(ws, "door2"), username=USER)
    assert r.status == 403 and b"root only" not in r.body, r
    for mode in ("replace", "merge"):
        r = restore(envd.client, os.path.join(ws, "door2"), tar_of([(info("planted"), b"x")]), mode=mode,
                    username=USER)
        assert r.status == 403, r
        assert snapshot(closed) == before


def test_what_a_user_restores_is_theirs(envd, shared_tmp, as_user):
    src = os.path.join(shared_tmp, "src")
    _tree(src)
    dst = _users_dir(shared_tmp, "dst")
    body = capture(envd.client, src, username="root").body
    r = restore(envd.client, dst, body, content_type="application/zstd", username=USER)
    assert r.status == 200, r
    assert snapshot(dst) == snapshot(src)
    for d, dirs, files in os.walk(dst):
        for n in dirs + files:
            st = os.lstat(os.path.join(d, n))
            assert (st.st_uid, st.st_gid) == (as_user.pw_uid, as_user.pw_gid), os.path.join(d, n)
    # and a replace by the user removes their old files, read-only directories included
    os.chmod(os.path.join(dst, "bin"), 0o555)
    r = restore(envd.client, dst, tar_of([(info("only"), b"x")]), username=USER)
    assert r.status == 200, r
    assert sorted(os.listdir(dst)) == ["only"]


@needs_git
def test_root_captures_a_users_repository(envd, shared_tmp, as_user):
    ws = make_repo(os.path.join(shared_tmp, "repo"))
    for d, dirs, files in os.walk(ws):
        for n in dirs + files + ["."]:
            os.lchown(os.path.join(d, n), as_user.pw_uid, as_user.pw_gid)
    r = capture(envd.client, ws, username="root")
    assert r.status == 200, r
    assert r.headers["X-Hangar-Selection"] == "git"
    names = {n for n, _, _ in members(unzstd(r.body))}
    assert "notes/todo.txt" in names and "node_modules/dep/index.js" not in names
    r = capture(envd.client, ws, username=USER)
    assert r.status == 200 and r.headers["X-Hangar-Selection"] == "git", r


# ---- the worker ------------------------------------------------------------------------


def _proc_status(pid):
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            out[k] = v.split()
    return out


def test_a_users_worker_is_that_user_and_holds_nothing_of_the_daemon(make_envd, shared_tmp, as_user):
    d = make_envd(token=True)
    ws = _users_dir(shared_tmp)
    rc = RawConn(d.port, timeout=30)
    try:
        rc.send(raw_request_bytes("PUT", archive_url(ws, mode="replace", username=USER),
                                  {"Content-Type": "application/x-tar", "Content-Length": "100000",
                                   "X-Access-Token": d.token}, body=None))
        rc.send(tar_of([(info("a"), b"a" * 50_000)])[:20_000])  # the body stalls half-way
        poll(lambda: staging_dirs(ws), 10, what="the staging directory")
        kid, = _children(d.proc.pid)
        with open(f"/proc/{kid}/cmdline", "rb") as f:
            argv = f.read().split(b"\0")
        assert argv[1:3] == [b"--archive-worker", b"restore"], argv
        # The worker program beside the daemon, not the daemon again.
        from conftest import worker_binary
        assert os.path.samefile(f"/proc/{kid}/exe", worker_binary()), os.readlink(f"/proc/{kid}/exe")
        st = _proc_status(kid)
        assert st["Uid"] == [str(as_user.pw_uid)] * 4 and st["Gid"] == [str(as_user.pw_gid)] * 4, st
        assert int(st["CapEff"][0], 16) == 0 and int(st["CapPrm"][0], 16) == 0, st
        assert st["NoNewPrivs"] == ["1"], st
        # Its pipes, the standard descriptors and what it opened itself (the
        # workspace, the staging directory): no socket of the daemon's.
        links = {int(n): os.readlink(f"/proc/{kid}/fd/{n}") for n in os.listdir(f"/proc/{kid}/fd")}
        assert all(links[fd].startswith("pipe:") for fd in (3, 4, 5)), links
        assert not [t for fd, t in links.items() if fd > 2 and not t.startswith("pipe:") and
                    not t.startswith(ws)], links
        with open(f"/proc/{kid}/environ", "rb") as f:
            assert d.token.encode() not in f.read()
    finally:
        rc.abort()
    poll(lambda: not staging_dirs(ws), 10, what="the staging directory to go")
    assert os.listdir(ws) == []


def _run_worker(args, user=None, pass_pipes=True):
    """Runs the worker (hangar-envd-archive --archive-worker) by hand; its exit status."""
    from conftest import worker_binary
    fds, keep = [], []
    if pass_pipes:
        for _ in range(3):
            r, w = os.pipe()
            fds += [r, w]
        keep = fds[:]

    def arrange():
        if pass_pipes:
            for i, fd in enumerate((fds[0], fds[2], fds[5])):
                os.dup2(fd, 3 + i)

    try:
        p = subprocess.run([worker_binary(), "--archive-worker", *args], capture_output=True, timeout=30,
                           preexec_fn=arrange, pass_fds=keep,
                           user=user.pw_uid if user else None, group=user.pw_gid if user else None,
                           extra_groups=[] if user else None)
    finally:
        for fd in fds:
            os.close(fd)
    return p.returncode, p.stderr.decode(errors="replace")


def test_the_worker_mode_run_by_hand_gains_nothing(shared_tmp, as_user):
    ws = os.path.join(shared_tmp, "root-owned")
    write(os.path.join(ws, "root-file"), "root's\n")
    before = snapshot(ws)
    uid, gid = str(as_user.pw_uid), str(as_user.pw_gid)
    # A user naming root, or another user, is refused before anything is touched.
    for who in (["0", "0", "root"], ["1", "1", "daemon"]):
        status, err = _run_worker(["restore", *who, ws, "replace", "tar"], user=as_user)
        assert status == 2 and "internal to hangar-envd" in err, (who, status, err)
    # root naming the user: the worker never switches users itself.
    status, err = _run_worker(["restore", uid, gid, USER, ws, "replace", "tar"])
    assert status == 2 and "not started as the user" in err, err
    # without the daemon's pipes
    status, err = _run_worker(["capture", uid, gid, USER, ws, "all"], user=as_user, pass_pipes=False)
    assert status == 2 and "not started by hangar-envd" in err, err
    # malformed arguments
    for args in (["restore", uid, gid, USER, "relative", "replace", "tar"],
                 ["restore", uid, gid, USER, ws, "replace"],
                 ["restore", "-1", gid, USER, ws, "replace", "tar"],
                 ["unpack", uid, gid, USER, ws, "replace", "tar"]):
        status, err = _run_worker(args, user=as_user)
        assert status == 2, (args, status, err)
    assert snapshot(ws) == before and staging_dirs(ws) == []


def test_odd_but_harmless_archives_extract_as_tar_would(client, tmp_path):
    """Parents left out, "./" and "//" in names, a path named twice, and
    directories that allow no writing once their contents are in."""
    ws = tmp_path / "ws"
    os.makedirs(ws)
    body = tar_of([
        (info("deep/er/file.txt"), b"no parents listed"),
        (info("./dot/.//twice.txt"), b"first"),
        (info("dot/twice.txt"), b"second"),
        (info("was-a-file"), b"x"),
        (info("was-a-file/", tarfile.DIRTYPE, 0o755), None),
        (info("was-a-file/inside"), b"y"),
        (info("locked/", tarfile.DIRTYPE, 0o500), None),
        (info("locked/sub/", tarfile.DIRTYPE, 0o555), None),
        (info("locked/sub/f", mode=0o400), b"z"),
        (info("link-then-file", tarfile.SYMTYPE, 0o777, linkname="/etc/passwd"), None),
        (info("link-then-file"), b"a file now"),
    ])
    r = restore(client, ws, body)
    assert r.status == 200, r
    with open(ws / "deep/er/file.txt", "rb") as f:
        assert f.read() == b"no parents listed"
    with open(ws / "dot/twice.txt", "rb") as f:
        assert f.read() == b"second"
    assert os.path.isdir(ws / "was-a-file") and os.path.exists(ws / "was-a-file/inside")
    assert stat.S_IMODE(os.stat(ws / "locked").st_mode) == 0o500
    assert stat.S_IMODE(os.stat(ws / "locked/sub").st_mode) == 0o555
    assert stat.S_IMODE(os.stat(ws / "locked/sub/f").st_mode) == 0o400
    assert os.stat(ws / "locked").st_mtime == 1_700_000_000
    assert not os.path.islink(ws / "link-then-file")
    with open(ws / "link-then-file", "rb") as f:
        assert f.read() == b"a file now"
    os.chmod(ws / "locked", 0o700)
    os.chmod(ws / "locked/sub", 0o700)
    # a file over a directory that holds something is refused, and nothing changes
    before = snapshot(ws)
    body = tar_of([(info("d/", tarfile.DIRTYPE, 0o755), None), (info("d/x"), b"x"), (info("d"), b"flat")])
    r = restore(client, ws, body)
    assert r.status == 400 and r.json()["message"].startswith('member "d"'), r
    assert snapshot(ws) == before
