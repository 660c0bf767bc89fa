"""The local sandbox's /etc: one template of the host's /etc shared by the
sandboxes started while the host's /etc stays as it was, each sandbox's own
files (users, names, resolver) over it, a new template once the host's /etc
changes, and old templates removed once no running sandbox holds them."""

import os
import tempfile
import uuid

import pytest

from conftest import Hangar, remove_runtime_dirs


@pytest.fixture
def own():
    """hangar on a state directory of this test's own, so its templates are the test's alone."""
    with tempfile.TemporaryDirectory(prefix="hangar-etc-") as d:
        h = Hangar(d)
        h.state_dir = d
        yield h
        for sid in h.ids():
            h("sandbox", "kill", sid)
        remove_runtime_dirs(d)


def templates(state_dir):
    d = os.path.join(state_dir, "local", ".etc")
    return sorted(n for n in os.listdir(d) if not n.startswith(".")) if os.path.isdir(d) else []


@pytest.fixture
def host_etc_file():
    """A file of the test's own in the host's /etc, removed at the end (needs root)."""
    if os.geteuid() != 0:
        pytest.skip("changing the host's /etc needs root")
    path = f"/etc/hangar-test-{uuid.uuid4().hex[:12]}"
    yield path
    for p in (path,):
        try:
            os.unlink(p)
        except FileNotFoundError:
            pass


def exec_out(hangar, sid, script):
    return hangar.ok("sandbox", "exec", sid, "--", "sh", "-c", script).stdout.decode()


def test_own_files_over_one_shared_template(own):
    hangar, state_dir = own, own.state_dir
    a = hangar.ok("sandbox", "create").stdout.decode().strip()
    b = hangar.ok("sandbox", "create").stdout.decode().strip()
    try:
        assert templates(state_dir) == [t for t in templates(state_dir) if t.endswith("-on")]
        assert len(templates(state_dir)) == 1
        # Each sandbox's names are its own, though the rest of /etc is one copy.
        assert exec_out(hangar, a, "cat /etc/hostname").strip() == a
        assert exec_out(hangar, b, "cat /etc/hostname").strip() == b
        assert a in exec_out(hangar, a, "cat /etc/hosts") and b not in exec_out(hangar, a, "cat /etc/hosts")
        passwd = exec_out(hangar, a, "cat /etc/passwd")
        assert passwd.startswith("root:x:0:0:") and "\nuser:x:" in passwd
        assert "nameserver" in exec_out(hangar, a, "cat /etc/resolv.conf")
        # The host's users and hashes never show; the template cannot be written.
        assert exec_out(hangar, a, "ls /etc/shadow /etc/gshadow 2>&1 || true").count("No such file") == 2
        r = hangar("sandbox", "exec", b, "--", "sh", "-c", "echo x > /etc/os-release")
        assert r.returncode != 0
        # The host's files are there as they are on the host.
        with open("/etc/os-release") as f:
            assert exec_out(hangar, a, "cat /etc/os-release") == f.read()
    finally:
        hangar("sandbox", "kill", a)
        hangar("sandbox", "kill", b)


def test_network_off_has_no_resolver_and_its_own_template(own):
    hangar, state_dir = own, own.state_dir
    on = hangar.ok("sandbox", "create").stdout.decode().strip()
    off = hangar.ok("sandbox", "create", "--network", "off").stdout.decode().strip()
    try:
        r = hangar("sandbox", "exec", off, "--", "cat", "/etc/resolv.conf")
        assert r.returncode != 0
        kinds = sorted(t.rsplit("-", 1)[1] for t in templates(state_dir))
        assert kinds == ["off", "on"]
    finally:
        hangar("sandbox", "kill", on)
        hangar("sandbox", "kill", off)


def test_a_host_change_makes_a_new_template_and_the_old_goes_once_unused(own, host_etc_file):
    hangar, state_dir = own, own.state_dir
    old = hangar.ok("sandbox", "create").stdout.decode().strip()
    try:
        first = templates(state_dir)
        assert len(first) == 1
        with open(host_etc_file, "w") as f:
            f.write("seen\n")
        os.chmod(host_etc_file, 0o644)
        new = hangar.ok("sandbox", "create").stdout.decode().strip()
        name = os.path.basename(host_etc_file)
        # The new sandbox has it in its copies; the running one sees it through its overlay
        # (hangar(1), Files), and keeps the copies it started with.
        assert exec_out(hangar, new, f"cat /etc/{name}") == "seen\n"
        assert exec_out(hangar, old, f"cat /etc/{name}") == "seen\n"
        with open("/etc/os-release") as f:
            assert exec_out(hangar, old, "cat /etc/os-release") == f.read()
        # The old template is held by the running sandbox: both are there.
        assert len(templates(state_dir)) == 2 and first[0] in templates(state_dir)
        hangar.ok("sandbox", "kill", old)
        hangar.ok("sandbox", "kill", new)
        # The next change builds a third; the two nobody holds any more are removed.
        with open(host_etc_file, "w") as f:
            f.write("changed again\n")
        last = hangar.ok("sandbox", "create").stdout.decode().strip()
        try:
            now = templates(state_dir)
            assert len(now) == 1 and now[0] not in first, (first, now)
            assert exec_out(hangar, last, f"cat /etc/{name}") == "changed again\n"
        finally:
            hangar("sandbox", "kill", last)
    finally:
        hangar("sandbox", "kill", old)


def mounts_under_etc(hangar, sid):
    """The sandbox's mounts at and below /etc, as its mount table names them."""
    table = exec_out(hangar, sid, "cat /proc/self/mountinfo")
    return [line.split()[4] for line in table.splitlines() if line.split()[4] == "/etc" or line.split()[4].startswith("/etc/")]


def host_dir():
    """A directory of the host's /etc every user can list, with something in it."""
    for name in sorted(os.listdir("/etc")):
        path = os.path.join("/etc", name)
        if (not os.path.islink(path) and os.path.isdir(path) and os.stat(path).st_mode & 0o005 == 0o005
                and os.listdir(path)):
            return name
    pytest.skip("the host's /etc has no directory every user can list")


@pytest.mark.parametrize("layout", ["auto", "binds"])
def test_both_layouts_show_the_host_s_directories_and_hide_the_same_names(own, layout):
    hangar = own
    env = {"HANGAR_LOCAL_ETC": layout}
    sid = hangar.ok("sandbox", "create", env=env).stdout.decode().strip()
    try:
        mounts = mounts_under_etc(hangar, sid)
        # auto: one overlay and nothing under it; binds: the copies and one mount per host directory.
        if layout == "auto":
            assert mounts == ["/etc"], mounts
            assert " /etc " in exec_out(hangar, sid, "grep ' - overlay ' /proc/self/mountinfo")
        else:
            assert len(mounts) > 1 and "/etc/passwd" in mounts, mounts
        d = host_dir()
        assert sorted(exec_out(hangar, sid, f"ls -A /etc/{d}").split()) == sorted(os.listdir(f"/etc/{d}"))
        hidden = exec_out(hangar, sid, "ls -A /etc | grep -x -e shadow -e gshadow -e 'passwd-' -e 'group-' "
                                       "-e sudoers -e subuid -e subgid -e .pwd.lock || true")
        assert hidden == ""
        assert exec_out(hangar, sid, "cat /etc/hostname").strip() == sid
        # Read-only either way (the sandbox's root: tests/local-isolation).
        r = hangar("sandbox", "exec", sid, "--", "sh", "-c", "echo x > /etc/hostname")
        assert r.returncode != 0
        r = hangar("sandbox", "exec", sid, "--", "sh", "-c", f"touch /etc/{d}/hangar-planted")
        assert r.returncode != 0 and not os.path.exists(f"/etc/{d}/hangar-planted")
    finally:
        hangar("sandbox", "kill", sid)


@pytest.fixture
def host_names():
    """Files the test makes in the host's /etc and removes at the end (needs root)."""
    if os.geteuid() != 0:
        pytest.skip("changing the host's /etc needs root")
    made = []
    yield made
    for p in made:
        try:
            os.unlink(p)
        except FileNotFoundError:
            pass


def test_the_host_s_unreadable_and_never_shown_files_stay_out(own, host_names):
    """As a hostile host-side change would meet it: files that are not everybody's, before the
    sandbox and after, and a never-shown name the host makes while the sandbox runs."""
    hangar = own
    # A never-shown name the host lacks (sudo not installed; no backup of the id files yet).
    later_hidden = next((p for p in ("/etc/sudoers", "/etc/subgid-", "/etc/subuid-") if not os.path.lexists(p)), None)
    if later_hidden is None:
        pytest.skip("the host has every never-shown name the test could make")

    def host_file(path, text, mode):
        host_names.append(path)
        with open(path, "w") as f:
            f.write(text)
        os.chmod(path, mode)
        return path

    before = host_file(f"/etc/hangar-test-{uuid.uuid4().hex[:12]}", "secret before\n", 0o600)
    sid = hangar.ok("sandbox", "create").stdout.decode().strip()
    try:
        name = os.path.basename(before)
        # Not readable by all when the sandbox started: not there at all.
        assert exec_out(hangar, sid, f"ls -A /etc | grep -c -x {name} || true").strip() == "0"
        r = hangar("sandbox", "exec", sid, "--", "cat", before)
        assert r.returncode != 0 and b"secret" not in r.stdout
        # Made while it runs, not readable by all: the host's permissions keep it out (the sandbox's
        # root is no host id that owns anything: tests/local-isolation).
        after = host_file(f"/etc/hangar-test-{uuid.uuid4().hex[:12]}", "secret after\n", 0o600)
        r = hangar("sandbox", "exec", sid, "--", "cat", after)
        assert r.returncode != 0 and b"secret" not in r.stdout
        # A name never shown stays hidden even when the host makes it later, readable by all.
        host_file(later_hidden, "hangar-test\n", 0o644)
        r = hangar("sandbox", "exec", sid, "--", "cat", later_hidden)
        assert r.returncode != 0 and b"hangar-test" not in r.stdout
    finally:
        hangar("sandbox", "kill", sid)


def test_binds_keep_what_the_host_adds_later_out(own, host_etc_file):
    hangar = own
    env = {"HANGAR_LOCAL_ETC": "binds"}
    old = hangar.ok("sandbox", "create", env=env).stdout.decode().strip()
    try:
        with open(host_etc_file, "w") as f:
            f.write("seen\n")
        os.chmod(host_etc_file, 0o644)
        name = os.path.basename(host_etc_file)
        assert hangar("sandbox", "exec", old, "--", "cat", f"/etc/{name}").returncode != 0
        new = hangar.ok("sandbox", "create", env=env).stdout.decode().strip()
        try:
            assert exec_out(hangar, new, f"cat /etc/{name}") == "seen\n"
        finally:
            hangar("sandbox", "kill", new)
    finally:
        hangar("sandbox", "kill", old)
