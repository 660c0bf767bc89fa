"""Image sandboxes of an unprivileged caller with subordinate ids: the test
user `user` imports the Debian image and the static busybox root into a
store of its own (its layers owned by its image range of subordinate ids,
hangar-images(7)) and runs them.
Each step runs unpriv_caller.py as `user`; the test, as root, checks the
store around it."""

import hashlib
import json
import os
import platform
import pwd
import shutil
import stat
import subprocess
import sys
import tempfile

import pytest

from conftest import layer_tar
from images import PATH, busybox_tar, debian_tar

HERE = os.path.dirname(os.path.abspath(__file__))
NAME = "hangar-test/unpriv:1"
HOSTILE = "hangar-test/unpriv-hostile:1"
BUSYBOX = "hangar-test/unpriv-busybox:1"
SUB_SLOT = 1024


def subids(user, path):
    with open(path) as f:
        for line in f:
            parts = line.strip().split(":")
            if len(parts) == 3 and parts[0] in (user.pw_name, str(user.pw_uid)):
                return int(parts[1]), int(parts[2])
    return None


def oci_layout(path, config, *tars):
    """An OCI image layout at path of uncompressed layers tars (bottom first) and config (the image's)."""
    def blob(data=None, src=None):
        h = hashlib.sha256()
        if src:
            with open(src, "rb") as f:
                for chunk in iter(lambda: f.read(1 << 20), b""):
                    h.update(chunk)
        else:
            h.update(data)
        dst = os.path.join(path, "blobs", "sha256", h.hexdigest())
        if src:
            shutil.copyfile(src, dst)
        else:
            with open(dst, "wb") as f:
                f.write(data)
        return "sha256:" + h.hexdigest(), os.path.getsize(dst)

    os.makedirs(os.path.join(path, "blobs", "sha256"))
    layers = [blob(src=t) for t in tars]
    arch = {"x86_64": "amd64", "aarch64": "arm64"}.get(platform.machine(), platform.machine())
    cfg = json.dumps({"architecture": arch, "os": "linux", "config": config,
                      "rootfs": {"type": "layers", "diff_ids": [d for d, _ in layers]}}).encode()
    cd, cs = blob(cfg)
    manifest = json.dumps({
        "schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": cd, "size": cs},
        "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar", "digest": d, "size": s}
                   for d, s in layers]}).encode()
    md, ms = blob(manifest)
    with open(os.path.join(path, "oci-layout"), "w") as f:
        f.write('{"imageLayoutVersion":"1.0.0"}')
    with open(os.path.join(path, "index.json"), "w") as f:
        json.dump({"schemaVersion": 2, "manifests": [
            {"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": md, "size": ms}]}, f)


class Caller:
    """The test user with a state directory, image store and home of its own."""

    def __init__(self, user, top):
        self.user = user
        self.home = os.path.join(top, "home")
        os.mkdir(self.home)
        os.chown(self.home, user.pw_uid, user.pw_gid)
        self.images = os.path.join(self.home, "images")
        self.env = {k: v for k, v in os.environ.items()
                    if not k.startswith("HANGAR_") or k in ("HANGAR_ENVD_PATH", "HANGAR_JAIL_PATH")
                    or k.startswith("HANGAR_PY_")}
        self.env.update(HOME=self.home, HANGAR_STATE_DIR=os.path.join(self.home, "state"),
                        HANGAR_IMAGE_DIR=self.images)

    def __call__(self, *args):
        def drop():
            os.setgid(self.user.pw_gid)
            os.setgroups([])
            os.setuid(self.user.pw_uid)

        r = subprocess.run([sys.executable, os.path.join(HERE, "unpriv_caller.py"), *args], env=self.env,
                           preexec_fn=drop, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=600)
        assert r.returncode == 0, r.stderr.decode(errors="replace")
        return json.loads(r.stdout.decode().splitlines()[-1])

    def layers(self):
        d = os.path.join(self.images, "layers")
        return sorted(n for n in os.listdir(d) if os.path.isdir(os.path.join(d, n))) if os.path.isdir(d) else []

    def state(self):
        """Every file of the layers: type, owner, mode, size, mtime, and regular files' hashes."""
        out = {}
        root = os.path.join(self.images, "layers")
        for dirpath, dirnames, filenames in os.walk(root):
            for name in dirnames + filenames:
                path = os.path.join(dirpath, name)
                st = os.lstat(path)
                h = ""
                if stat.S_ISREG(st.st_mode):
                    with open(path, "rb") as f:
                        h = hashlib.sha256(f.read()).hexdigest()
                out[os.path.relpath(path, root)] = (st.st_mode, st.st_uid, st.st_gid, st.st_size,
                                                    st.st_mtime_ns, h)
        return out


@pytest.fixture(scope="module")
def caller():
    if os.geteuid() != 0:
        pytest.skip("the suite switches to the test user `user`: it runs as root")
    try:
        user = pwd.getpwnam("user")
    except KeyError:
        pytest.skip("no unprivileged user `user` to be the caller")
    uids, gids = subids(user, "/etc/subuid"), subids(user, "/etc/subgid")
    if not uids or not gids or min(uids[1], gids[1]) < 2 * SUB_SLOT:
        pytest.skip("`user` has too few subordinate ids in /etc/subuid and /etc/subgid (./dev test adds them)")
    top = tempfile.mkdtemp(prefix="hangar-img-unpriv-")
    os.chmod(top, 0o755)
    try:
        extra = os.path.join(top, "extra.tar")
        layer_tar(extra, [("srv", "dir", None, 0), ("srv/users-file", "file", b"mine\n", 1000)])
        layout = os.path.join(top, "layout")
        oci_layout(layout, {"Env": [PATH, "FROM_IMAGE=image"], "WorkingDir": "/srv/app", "User": "user"},
                   debian_tar(), extra)
        hostile = os.path.join(top, "hostile.tar")
        layer_tar(hostile, [("srv", "dir", None, 0), ("srv/far", "file", b"x\n", 70000)])
        hostile_layout = os.path.join(top, "hostile")
        oci_layout(hostile_layout, {"Env": [PATH]}, hostile)
        c = Caller(user, top)
        c.layout, c.hostile, c.ranges, c.top = layout, hostile_layout, (uids, gids), top
        c.layers_before_import = c.layers()
        c.digest, c.progress = c("import", layout, NAME)
        yield c
    finally:
        subprocess.run(["rm", "-rf", top], check=True)


def image_range(c):
    (us, uc), (gs, gc) = c.ranges
    last = min(uc, gc) // SUB_SLOT - 1
    return us + last * SUB_SLOT, gs + last * SUB_SLOT


def test_layers_are_owned_by_the_image_range(caller):
    uid, gid = image_range(caller)
    layers = caller.layers()
    assert len(layers) == 2
    roots = [os.path.join(caller.images, "layers", h, "root") for h in layers]
    owners = {(os.lstat(os.path.join(r, p)).st_uid, os.lstat(os.path.join(r, p)).st_gid)
              for r in roots for p in ("usr/bin/dpkg", "etc/passwd", "srv/users-file") if os.path.lexists(
                  os.path.join(r, p))}
    assert owners == {(uid, gid), (uid + 1000, gid + 1000)}
    # The caller's own uid owns none of the image's files, nor does root.
    for r in roots:
        for dirpath, dirnames, filenames in os.walk(r):
            for name in dirnames + filenames:
                st = os.lstat(os.path.join(dirpath, name))
                assert uid <= st.st_uid < uid + SUB_SLOT and gid <= st.st_gid < gid + SUB_SLOT, (dirpath, name)


def test_sandboxes_of_the_image(caller):
    before = caller.state()
    seen = caller("probe", NAME)
    after = caller.state()
    base = [h for h in caller.layers()
            if os.path.exists(os.path.join(caller.images, "layers", h, "root", "usr/lib/os-release"))]
    with open(os.path.join(caller.images, "layers", base[0], "root", "usr/lib/os-release")) as f:
        want = f.read()
    assert "bookworm" in want and seen["os_release"] == [0, want, ""]
    # The image's Env, WorkingDir and User.
    assert seen["default"][0] == 0 and seen["default"][1].split() == ["image", "/srv/app", "user", "1000"]
    assert seen["owners"][1].splitlines() == ["0 0 root", "0 0 root", "1000 1000 user"]
    # Root installs into /usr of its sandbox only; `user` cannot.
    assert seen["install"] == [0, "done\n", ""]
    assert seen["installed_a"] == [0, "installed\nuser\nchanged\n", ""]
    assert seen["installed_b"][0] == 0 and seen["installed_b"][1].splitlines()[:2] == ["no-program", "no-dir"]
    assert "changed" not in seen["installed_b"][1]
    assert seen["user_cannot"][0] != 0
    # Neither the commands' user nor their root reaches envd, which is another uid than both.
    assert seen["envd_user"] == [0, "environ:13 mem:13 kill:1 uid:other\n", ""]
    assert seen["envd_root"] == [0, "environ:13 mem:13 kill:1 uid:other\n", ""]
    # Image sandboxes share the image range: both roots are the same id inside.
    assert seen["same_ids"] == [[0, "0\n", ""], [0, "0\n", ""]]
    # The layers were never written: every file's hash, owner, mode and mtime as before.
    assert after == before
    assert not any("hangar-installed" in p or "hangar-pkg" in p for p in after)


def test_progress_reaches_the_caller(caller):
    # Reported as the child unpacks the first layer, not only once it is done.
    first = os.path.getsize(debian_tar())
    assert any(layers == 0 and 0 < done < first for layers, done in caller.progress), caller.progress[:5]
    assert caller.progress[-1][0] == 2


def test_the_caller_cancels_an_import(caller):
    layout = os.path.join(caller.top, "cancel")
    other = os.path.join(caller.top, "other.tar")
    layer_tar(other, [("opt", "dir", None, 0), ("opt/big", "file", os.urandom(4 << 20), 0)])
    oci_layout(layout, {"Env": [PATH]}, other)
    layers = caller.layers()
    kind, message = caller("cancel", layout, "hangar-test/unpriv-cancel:1")
    assert kind == "CanceledError", message
    assert caller.layers() == layers
    assert os.listdir(os.path.join(caller.images, "tmp")) == []


def test_an_owner_beyond_the_range_is_refused(caller):
    layers = caller.layers()
    kind, message = caller("refused", caller.hostile, HOSTILE)
    assert kind == "RefusedError"
    assert '"srv/far"' in message and "70000" in message and "image range" in message
    assert caller.layers() == layers  # nothing half-made is kept


def test_a_layer_outside_the_range_is_not_run(caller):
    # As a layer the caller stored before it had subordinate ids would be: its own.
    top = os.path.join(caller.images, "layers", caller.layers()[-1], "root")
    st = os.lstat(top)
    os.chown(top, caller.user.pw_uid, caller.user.pw_gid)
    try:
        kind, message = caller("create", NAME)
    finally:
        os.chown(top, st.st_uid, st.st_gid)
    assert kind == "UnsupportedError" and top in message and "image range" in message and "hangar image rm" in message
    assert caller("create", NAME) == [0, "made\n", ""]


def test_the_caller_removes_its_layers(caller):
    assert caller.layers()
    assert caller("rm", NAME) == "removed"
    assert caller.layers() == []
    caller.digest, _ = caller("import", caller.layout, NAME)  # for any test after this one


@pytest.fixture(scope="module")
def busybox(caller):
    """The static busybox root (no libc, bash or coreutils), in the caller's store for the tests below."""
    layout = os.path.join(caller.top, "busybox")
    oci_layout(layout, {"Env": ["PATH=/bin"]}, busybox_tar())
    caller("import", layout, BUSYBOX)
    yield BUSYBOX
    caller("rm", BUSYBOX)


@pytest.mark.parametrize("image", ["debian", "busybox"])
def test_everything_works_in_an_image(caller, busybox, image):
    """As test_local_image.py's test of the same name for root: commands, files, a terminal, a checkpoint and a
    session parked hot then resumed cold, in the caller's Debian image and in its busybox root."""
    before = caller.state()
    seen = caller("everything", NAME if image == "debian" else busybox)
    # The uniform exec rules: exit code and both streams; a timeout kills the command (busybox: no coreutils
    # timeout, envd stands in); a program not found is 127.
    assert seen["exit"] == [3, "out\n", "err\n"]
    assert seen["timeout"] == [True, 124, ""]
    # Ignoring SIGTERM does not outlive the timeout: SIGKILL came (no "not-killed" after the sleep). Its
    # timed_out is not judged here: the library reports 0 for this on every local template, image or not.
    _, code, out = seen["stubborn"]
    assert code in (-1, 137) and "not-killed" not in out, seen["stubborn"]
    assert seen["missing"] == 127
    # The command runs on the image's own libc (busybox: none), nothing of envd's runtime reaches it.
    code, maps, _ = seen["runtime"]
    assert code == 0 and "/run/hangar" not in maps and "LD_LIBRARY_PATH" not in maps and "LD_PRELOAD" not in maps
    libs = {line.split()[-1] for line in maps.splitlines() if ".so" in line.split()[-1]}
    if image == "debian":
        assert any(lib.startswith("/usr/lib/") and "/libc.so.6" in lib for lib in libs), libs
    else:
        assert not libs, libs
    # Files through the library: written, read back, seen by commands, listed.
    assert seen["read_back"] is True
    assert seen["as_seen"] == [0, "16384\nuser\n", ""]
    assert seen["listed"] == [["/workspace/listed/a.txt", False, 6], ["/workspace/listed/deeper", True, None]]
    # A terminal: the shell's arithmetic ran and its stdin is a pseudo-terminal.
    assert "pty-42" in seen["pty"] and "/dev/pts/" in seen["pty"], seen["pty"]
    # The checkpoint restored into a second sandbox, which did not have the files before.
    assert seen["before_restore"] is False
    assert seen["restored"] is True
    assert seen["restored_names"] == ["/workspace/w/f", "/workspace/w/sub", "/workspace/w/sub/bin",
                                      "/workspace/w/sub/empty"]
    # A session parked hot keeps its processes; resumed cold, it keeps its files.
    assert seen["hot"] == ["hot", "state\n", [0, "sleep 1000 ", ""]]
    assert seen["cold"] == ["cold", "state\n", [0, "ok\n", ""]]
    # All of it in the sandboxes' writable layers: the shared layers were never written.
    assert caller.state() == before
