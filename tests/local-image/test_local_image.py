"""Local sandboxes whose root is an image: the image's layers read-only
under a writable layer of the sandbox's own (a root caller)."""

import fcntl
import hashlib
import os
import signal
import stat
import time

import pytest

import hangar
from conftest import BUSYBOX, DEBIAN, HOSTILE, LAYERED, TARGET, make


def wait_for(what, cond, timeout=30.0, interval=0.02, why=None):
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            pytest.fail("timed out waiting for " + what + (": " + why() if why else ""))
        time.sleep(interval)


def store_state():
    """Every entry of the image store but the use locks: type, owner, mode, size, and regular files' hashes."""
    root, out = os.environ["HANGAR_IMAGE_DIR"], {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = os.path.join(dirpath, name)
            rel = os.path.relpath(path, root)
            if rel.startswith("use"):
                continue
            st = os.lstat(path)
            h = ""
            if stat.S_ISREG(st.st_mode):
                with open(path, "rb") as f:
                    h = hashlib.sha256(f.read()).hexdigest()
            out[rel] = (st.st_mode, st.st_uid, st.st_gid, st.st_size, st.st_mtime_ns, h,
                        os.listxattr(path, follow_symlinks=False))
    return out


def run(sb, cmd, user="user", ok=True):
    r = sb.exec(cmd, user=user, timeout=120)
    if ok:
        assert r.exit_code == 0, f"{cmd!r} as {user}: {r.exit_code} {r.stdout.text} {r.stderr.text}"
    return r


def layer_root(digest_hex_of_layer):
    return os.path.join(os.environ["HANGAR_IMAGE_DIR"], "layers", digest_hex_of_layer, "root")


def debian_layer():
    import json
    d = os.environ["HANGAR_IMAGE_DIR"]
    for rec in os.listdir(os.path.join(d, "images")):
        with open(os.path.join(d, "images", rec)) as f:
            r = json.load(f)
        if "docker.io/" + DEBIAN in r["names"]:  # as the store records a name: normalised
            return r["layers"][0][7:]
    pytest.fail("no Debian image in the store")


def test_the_root_is_the_images(ctx, images):
    with make(ctx, DEBIAN) as sb:
        with open(os.path.join(layer_root(debian_layer()), "usr/lib/os-release"), "rb") as f:
            want = f.read()
        assert b"bookworm" in want
        assert run(sb, "cat /etc/os-release").stdout == want
        assert sb.info().template_id == DEBIAN


def test_found_by_digest_and_prefix_not_by_a_stranger(ctx, images):
    hexd = images["debian"][7:]
    for ref in (images["debian"], hexd[:12]):
        with make(ctx, ref) as sb:
            assert run(sb, "cat /etc/debian_version").stdout.text.startswith("12")
    for ref in ("hangar-test/nothing:1", hexd[:11], "sha256:" + "0" * 64):
        with pytest.raises(hangar.NotFoundError) as e:
            make(ctx, ref)
        assert "no template or image" in str(e.value) and ref in str(e.value)


def test_env_workdir_and_user(ctx, images):
    with make(ctx, DEBIAN, env={"BOTH": "caller"}) as sb:
        r = run(sb, "echo $FROM_IMAGE $BOTH; pwd; id -un")
        assert r.stdout.text.split() == ["image", "caller", "/srv/app", "user"]
    # User "1": uid 1 of the image's passwd, Debian's daemon; no WorkingDir: /workspace.
    with make(ctx, LAYERED) as sb:
        assert run(sb, "id -un; pwd", user=None).stdout.text.split() == ["daemon", "/workspace"]


def tiny_deb(sb):
    """Builds a package of one script with dpkg-deb in the sandbox, as its user."""
    run(sb, "mkdir -p /tmp/pkg/DEBIAN /tmp/pkg/usr/bin && "
            "printf 'Package: hangar-hello\\nVersion: 1.0\\nArchitecture: all\\nMaintainer: t <t@t>\\n"
            "Description: test\\n' > /tmp/pkg/DEBIAN/control && "
            "printf '#!/bin/sh\\necho hello from a package\\n' > /tmp/pkg/usr/bin/hangar-hello && "
            "chmod 755 /tmp/pkg/usr/bin/hangar-hello && dpkg-deb --root-owner-group -b /tmp/pkg /tmp/hello.deb")


def test_root_installs_a_package_only_in_its_sandbox(ctx, images):
    before = store_state()
    with make(ctx, DEBIAN) as a, make(ctx, DEBIAN) as b:
        tiny_deb(a)
        assert run(a, "dpkg -i /tmp/hello.deb", ok=False, user="user").exit_code != 0
        run(a, "dpkg -i /tmp/hello.deb", user="root")
        assert run(a, "hangar-hello").stdout == b"hello from a package\n"
        assert run(a, "stat -c %u /usr/bin/hangar-hello").stdout == b"0\n"
        assert run(b, "command -v hangar-hello", ok=False).exit_code != 0
        assert run(b, "dpkg -s hangar-hello", ok=False).exit_code != 0
    assert not any("hangar-hello" in p for p in store_state())
    assert store_state() == before


def test_image_files_are_roots_and_users(ctx, images):
    with make(ctx, LAYERED) as sb:
        out = run(sb, "stat -c '%u %g %U' /usr/bin/dpkg /etc/passwd /srv/users-file /").stdout.text.splitlines()
        assert out == ["0 0 root", "0 0 root", "1000 1000 user", "0 0 root"]


def test_whiteout_and_opaque_dir(ctx, images):
    with make(ctx, LAYERED) as sb:
        assert run(sb, "test -e /etc/issue", ok=False).exit_code == 1
        assert run(sb, "test -e /etc/issue.net").exit_code == 0
        assert run(sb, "ls -A /usr/share/doc").stdout == b"only-this\n"
    with make(ctx, DEBIAN) as sb:
        run(sb, "test -e /etc/issue && test -e /usr/share/doc/dpkg")


def test_disk_limit_holds_for_the_writable_layer(images):
    c = hangar.Context({"HANGAR_DEFAULT_PROVIDER": "local", "HANGAR_LOCAL_NETWORK": "off",
                        "HANGAR_LOCAL_DISK_MB": "64"})
    with make(c, DEBIAN) as sb:
        r = run(sb, "dd if=/dev/zero of=/usr/big bs=1M count=100 2>&1", user="root", ok=False)
        assert r.exit_code != 0 and b"No space left on device" in r.stdout
        size = int(run(sb, "stat -c %s /usr/big").stdout)
        assert 32 << 20 < size <= 64 << 20


def test_root_cannot_write_the_layers(ctx, images):
    before = store_state()
    layer = layer_root(debian_layer())
    with make(ctx, DEBIAN) as sb:
        for cmd in ("mount -o remount,rw /", "mount -o remount,rw /usr",
                    "umount -l /", "mount -t tmpfs x /mnt"):
            assert run(sb, cmd, user="root", ok=False).exit_code != 0, cmd
        run(sb, "echo planted > /proc/self/root/usr/bin/planted; echo planted > /proc/1/root/usr/lib/planted; "
                "echo x >> /usr/bin/dpkg; rm -f /usr/bin/apt; chmod 4777 /usr/bin/env", user="root", ok=False)
        assert not os.path.exists(os.path.join(layer, "usr/bin/planted"))
        assert run(sb, "grep -l " + layer + " /proc/self/mountinfo", ok=False).exit_code != 0
    assert store_state() == before


def test_hostile_links_are_replaced_not_followed(ctx, images):
    with make(ctx, HOSTILE) as sb:
        for suffix in ("-passwd", "-hosts", "-hostname"):
            assert not os.path.lexists(TARGET + suffix), suffix
        run(sb, "test ! -L /etc/passwd && test ! -L /etc/hosts && test ! -L /workspace && test -d /workspace")
        # /run/hangar, where envd's tmpfs goes, was a link to /etc: mounted there, it would hide /etc.
        run(sb, "test ! -L /run/hangar && test -d /run/hangar && test -e /etc/debian_version", user="root")
        assert run(sb, "id -un").stdout == b"user\n"
        assert run(sb, "cat /etc/hostname").stdout.text.strip() == sb.id


def use_lock(images, name):
    return os.path.join(os.environ["HANGAR_IMAGE_DIR"], "use", images[name][7:] + ".lock")


def lock_free(path):
    with open(path) as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        return True


def test_the_use_lock_lives_as_long_as_the_sandbox(ctx, images):
    sb = make(ctx, DEBIAN)
    try:
        path = use_lock(images, "debian")
        assert not lock_free(path)
        sb.pause()
        assert not lock_free(path)
        sb.resume()
    finally:
        sb.kill()
    wait_for("the use lock to be free", lambda: lock_free(path))


def jail_of(sb):
    link = os.path.join(os.environ["HANGAR_STATE_DIR"], "local", "run")
    run = os.readlink(link) if os.path.islink(link) else os.path.dirname(link)
    with open(os.path.join(run, sb.id, "jail.pid")) as f:
        return int(f.read())


def descendants(pid):
    out, todo = set(), [pid]
    while todo:
        p = todo.pop()
        try:
            with open(f"/proc/{p}/task/{p}/children") as f:
                kids = [int(k) for k in f.read().split()]
        except OSError:
            continue
        out.update(kids)
        todo.extend(kids)
    return out


def describe(pids):
    out = []
    for p in pids:
        try:
            with open(f"/proc/{p}/stat") as f:
                st = f.read().split()
            with open(f"/proc/{p}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace")[:200]
            out.append(f"{p} state {st[2]} ppid {st[3]}: {cmd}")
        except OSError:
            out.append(f"{p} gone")
    return "; ".join(out)


def mount_ns(pid):
    try:
        return os.stat(f"/proc/{pid}/ns/mnt").st_ino
    except OSError:
        return None


def mounts_of_layers(hexd, namespaces=None):
    """Processes that see the layer mounted; only those in namespaces when given
    (other sandboxes of the same image, from tests running alongside, see it too)."""
    found = []
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        if namespaces is not None and mount_ns(p) not in namespaces:
            continue
        try:
            with open(f"/proc/{p}/mountinfo") as f:
                if hexd in f.read():
                    found.append(int(p))
        except OSError:
            pass
    return found


def test_kill_9_of_the_jail_leaves_nothing(ctx, images):
    hexd = debian_layer()
    sb = make(ctx, DEBIAN)
    jail = jail_of(sb)
    kids = descendants(jail)
    # The sandbox's own mount namespaces: the ones its layers are mounted in.
    own = {mount_ns(k) for k in kids} - {mount_ns(os.getpid()), None}
    assert kids and own and mounts_of_layers(hexd, own)
    os.kill(jail, signal.SIGKILL)
    wait_for("the jail's processes to go", lambda: not any(os.path.exists(f"/proc/{k}") for k in kids | {jail}))
    wait_for("the layers' mounts to go", lambda: not mounts_of_layers(hexd, own),
             why=lambda: describe(mounts_of_layers(hexd, own)))
    # Nor was any ever mounted where the host (this test) sees it.
    assert not mounts_of_layers(hexd, {mount_ns(os.getpid())})
    wait_for("the use lock to be free", lambda: lock_free(use_lock(images, "debian")))
    with pytest.raises(hangar.HangarError):
        sb.exec("true")


def test_a_store_others_can_write_is_refused(ctx, images):
    d = os.environ["HANGAR_IMAGE_DIR"]
    os.chmod(d, 0o770)
    try:
        with pytest.raises(hangar.ConfigError) as e:
            make(ctx, DEBIAN)
        assert "HANGAR_IMAGE_DIR" in str(e.value)
    finally:
        os.chmod(d, 0o700)


def test_an_incomplete_layer_is_never_used(ctx, images):
    import json
    d = os.environ["HANGAR_IMAGE_DIR"]
    half = "ab" * 32
    os.makedirs(os.path.join(d, "layers", half, "root", "etc"), exist_ok=True)
    rec = {"digest": "sha256:" + "cd" * 32, "names": ["docker.io/hangar-test/half:1"], "layers": ["sha256:" + half],
           "config": {}}
    path = os.path.join(d, "images", "cd" * 32 + ".json")
    with open(path, "w") as f:
        json.dump(rec, f)
    try:
        with pytest.raises(hangar.CreateError) as e:
            make(ctx, "hangar-test/half:1")
        assert "not complete" in str(e.value)
        # A record naming a path instead of a layer digest is refused, naming nothing outside.
        rec["layers"] = ["sha256:../../../etc"]
        with open(path, "w") as f:
            json.dump(rec, f)
        with pytest.raises(hangar.InvalidArgumentError):
            make(ctx, "hangar-test/half:1")
    finally:
        os.remove(path)


def test_an_unprivileged_caller_without_subids_is_told_why_not(images):
    """Without subordinate ids (HANGAR_LOCAL_SUBIDS off stands in for a host without them): refused, naming them.
    With them, test_unprivileged.py runs its images."""
    import pwd
    import subprocess
    import sys
    import tempfile
    try:
        user = pwd.getpwnam("user")
    except KeyError:
        pytest.skip("no unprivileged user `user` to be the caller")
    state = tempfile.mkdtemp(prefix="hangar-img-user-")
    os.chown(state, user.pw_uid, user.pw_gid)
    code = ("import hangar, sys\n"
            "c = hangar.Context({'HANGAR_DEFAULT_PROVIDER': 'local', 'HANGAR_LOCAL_NETWORK': 'off'})\n"
            "try:\n"
            "    hangar.Sandbox.create(c, provider='local', template=sys.argv[1])\n"
            "except hangar.UnsupportedError as e:\n"
            "    print(e)\n")
    env = dict(os.environ, HANGAR_STATE_DIR=state, HOME=state, HANGAR_IMAGE_DIR=os.path.join(state, "images"),
               HANGAR_LOCAL_SUBIDS="off")

    def drop():
        os.setgid(user.pw_gid)
        os.setgroups([])
        os.setuid(user.pw_uid)

    r = subprocess.run([sys.executable, "-c", code, DEBIAN], env=env, preexec_fn=drop, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=60)
    subprocess.run(["rm", "-rf", state], check=True)
    assert r.returncode == 0, r.stderr
    assert b"need a root caller or" in r.stdout and b"/etc/subuid" in r.stdout
    assert b"\"local\" template works" in r.stdout


def test_an_environment_with_an_image_runs_it(images, tmp_path):
    import json
    import subprocess
    envs = tmp_path / "environments.json"
    envs.write_text(json.dumps({
        "deb": {"image": DEBIAN, "env": {"FROM_ENV": "yes"}},
        "pinned": {"image": DEBIAN, "templates": {"local": "local"}},
    }))
    c = hangar.Context({"HANGAR_DEFAULT_PROVIDER": "local", "HANGAR_LOCAL_NETWORK": "off",
                        "HANGAR_ENVIRONMENTS_FILE": str(envs)})
    # No template named for local: the image is the sandbox's machine.
    with hangar.Sandbox.create(c, environment="deb", timeout=120) as sb:
        r = sb.exec(". /etc/os-release; echo $ID $FROM_ENV")
        assert r.stdout.split() == [b"debian", b"yes"], r
        assert sb.info().template_id == DEBIAN
    # A template named for the provider wins over the image.
    with hangar.Sandbox.create(c, environment="pinned", timeout=120) as sb:
        assert sb.info().template_id == "local"
    # Publishing for the local provider builds nothing: it runs the image itself.
    results = c.publish_environment("deb")
    assert [(r.provider, r.action, r.template_id, r.error) for r in results] == [("local", "image", DEBIAN, 0)]
    cli = os.environ.get("HANGAR_CLI")
    if cli:
        env = dict(os.environ, HANGAR_ENVIRONMENTS_FILE=str(envs), HANGAR_DEFAULT_PROVIDER="local")
        out = subprocess.run([cli, "environment", "publish", "deb", "--json"], env=env, capture_output=True, check=True)
        assert json.loads(out.stdout)[0]["action"] == "image"


@pytest.mark.parametrize("image", [DEBIAN, BUSYBOX])
def test_everything_works_in_an_image(ctx, images, image):
    """Commands, files, a terminal, a checkpoint and sessions (hot and cold) in a glibc image and in a
    busybox root without libc, bash or coreutils' timeout: envd's own runtime and stand-ins."""
    with make(ctx, image) as sb:
        # The uniform exec rules: exit codes, a timeout that kills, output.
        r = sb.exec("echo out; echo err >&2; exit 3")
        assert (r.exit_code, r.stdout, r.stderr) == (3, b"out\n", b"err\n")
        r = sb.exec("sleep 30", timeout=1)
        assert r.timed_out and r.exit_code != 0
        # The command runs on the image's own libc (none in busybox): nothing of envd's runtime.
        maps = sb.exec("cat /proc/self/maps; env").stdout.decode()
        assert "/run/hangar" not in maps and "LD_LIBRARY_PATH" not in maps and "LD_PRELOAD" not in maps
        # Files both ways.
        sb.write_file("/workspace/data.bin", bytes(range(256)) * 64)
        assert sb.read_file("/workspace/data.bin") == bytes(range(256)) * 64
        # A terminal.
        seen = []
        p = hangar.Process.start(sb, None, pty=True, cols=80, rows=24, on_output=lambda s, d: seen.append(d))
        p.write(b"echo pty-$((6*7))\nexit\n")
        p.wait(timeout=30)
        assert b"pty-42" in b"".join(seen)
        # A checkpoint into a second sandbox of the same image.
        sb.exec("mkdir -p /workspace/w && echo kept > /workspace/w/f")
        cp = hangar.Checkpoint.create(sb, workspace="/workspace/w", session_id="img-" + image.split("/")[1][:6])
        with make(ctx, image) as other:
            cp.restore(other, workspace="/workspace/w")
            assert other.read_file("/workspace/w/f") == b"kept\n"
        cp.delete()
    # A session: parked hot, then suspended and resumed cold.
    s = hangar.Session.create(ctx, provider="local", template=image, workspace="/workspace", timeout=300)
    try:
        s.sandbox().exec("echo state > /workspace/s; (sleep 1000 </dev/null >/dev/null 2>&1 &) ; true")
        s.suspend()
        s.resume()
        assert s.info().last_resume == hangar.RESUME_HOT
        assert s.sandbox().read_file("/workspace/s") == b"state\n"
        s.suspend(park=False)
        s.resume()
        assert s.info().last_resume == hangar.RESUME_COLD
        assert s.sandbox().read_file("/workspace/s") == b"state\n"
        assert s.sandbox().exec("cat /etc/hostname >/dev/null && echo ok").stdout == b"ok\n"
    finally:
        s.delete()
