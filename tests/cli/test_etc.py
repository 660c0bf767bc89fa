"""The local sandbox's /etc: one template of the host's /etc shared by the
sandboxes started while the host's /etc stays as it was, each sandbox's own
files (users, names, resolver) over it, a new template once the host's /etc
changes, and old templates removed once no running sandbox holds them."""

import os
import tempfile
import uuid

import pytest

from conftest import Hangar


@pytest.fixture
def own():
    """hangar on a state directory of this test's own, so its templates are the test's alone."""
    with tempfile.TemporaryDirectory(prefix="hangar-etc-") as d:
        h = Hangar(d)
        h.state_dir = d
        yield h
        for sid in h.ids():
            h("sandbox", "kill", sid)


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
        # The new sandbox sees the change; the running one keeps the /etc it started with, whole.
        assert exec_out(hangar, new, f"cat /etc/{name}") == "seen\n"
        assert hangar("sandbox", "exec", old, "--", "cat", f"/etc/{name}").returncode != 0
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
