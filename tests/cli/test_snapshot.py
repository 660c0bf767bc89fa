"""hangar snapshot create|list|delete|release, end to end on local sandboxes (root: the suite runs as root)."""

import json
import os
import re

import pytest

from conftest import wait_for


def one_error_line(r):
    lines = r.stderr.decode(errors="replace").splitlines()
    assert len(lines) == 1, f"expected one line on stderr, got {lines!r}"
    assert lines[0].startswith("hangar: "), lines[0]
    return lines[0]


def snapshot_dir(hangar, sid):
    return os.path.join(hangar.env["HANGAR_STATE_DIR"], "local", "snapshots", sid)


@pytest.fixture(autouse=True)
def needs_snapshots():
    if os.geteuid() != 0:
        pytest.skip("local snapshots here need root")


@pytest.mark.parametrize("args", [["snapshot"], ["snapshot", "frobnicate"], ["snapshot", "create"],
                                  ["snapshot", "create", "sb-1", "name", "extra"], ["snapshot", "delete"],
                                  ["snapshot", "delete", "a", "b"], ["snapshot", "delete", "--provider"],
                                  ["snapshot", "release"], ["snapshot", "delete", "--bogus", "x"],
                                  ["snapshot", "list", "extra"], ["snapshot", "list", "--provider"]],
                         ids=lambda a: " ".join(a))
def test_usage_errors(hangar, args):
    r = hangar(*args)
    assert r.returncode == 2, r.stderr
    one_error_line(r)
    assert r.stdout == b""


@pytest.mark.parametrize("args", [["help", "snapshot"], ["snapshot", "--help"], ["snapshot", "create", "--help"],
                                  ["help", "snapshot", "delete"], ["snapshot", "release", "--help"],
                                  ["snapshot", "list", "--help"]])
def test_help(hangar, args):
    assert hangar.ok(*args).stdout.decode().startswith("usage: hangar snapshot")


def test_create_from_delete_round_trip(hangar, sandbox):
    hangar.ok("sandbox", "exec", sandbox, "--", "sh", "-c", "echo kept > /workspace/k")
    out = hangar.ok("snapshot", "create", sandbox, "before-change").stdout.decode()
    assert re.fullmatch(r"snap-[0-9a-f]{16}\n", out), out
    snap = out.strip()
    assert os.path.isdir(snapshot_dir(hangar, snap))
    child = hangar.ok("sandbox", "create", "--template", snap).stdout.decode().strip()
    assert hangar.ok("sandbox", "exec", child, "--", "cat", "/workspace/k").stdout == b"kept\n"

    # In use: refused, naming why, and kept.
    r = hangar("snapshot", "delete", snap)
    assert r.returncode == 1
    line = one_error_line(r)
    assert snap in line and "in use" in line, line
    assert os.path.isdir(snapshot_dir(hangar, snap))

    hangar.ok("sandbox", "kill", child)
    hangar.ok("snapshot", "delete", snap)
    assert not os.path.exists(snapshot_dir(hangar, snap))
    r = hangar("sandbox", "create", "--template", snap)
    assert r.returncode == 1 and snap in one_error_line(r)


@pytest.mark.parametrize("sid", ["snap-0000000000000000", "not-a-snapshot", "../../etc"])
def test_delete_unknown_fails_clearly(hangar, sid):
    for verb in ("delete", "release"):
        r = hangar("snapshot", verb, sid)
        assert r.returncode == 1, (verb, r.stderr)
        line = one_error_line(r)
        assert "no snapshot" in line and sid in line, line
        assert r.stdout == b""


def test_delete_on_an_unknown_provider(hangar):
    r = hangar("snapshot", "delete", "--provider", "no-such-provider", "snap-0000000000000000")
    assert r.returncode == 1
    assert "no-such-provider" in one_error_line(r)


def test_snapshot_of_a_gone_sandbox(hangar):
    r = hangar("snapshot", "create", "sb-0000000000000000")
    assert r.returncode == 1
    assert "gone" in one_error_line(r)


def test_release_goes_with_the_last_child(hangar, sandbox):
    snap = hangar.ok("snapshot", "create", sandbox).stdout.decode().strip()
    child = hangar.ok("sandbox", "create", "--template", snap).stdout.decode().strip()
    hangar.ok("snapshot", "release", snap)
    assert os.path.isdir(snapshot_dir(hangar, snap)), "released while a child runs, yet gone"
    hangar.ok("sandbox", "kill", child)
    wait_for("the released snapshot to go", lambda: not os.path.exists(snapshot_dir(hangar, snap)), timeout=15)
    r = hangar("snapshot", "delete", snap)
    assert r.returncode == 1 and "no snapshot" in one_error_line(r)
    # Unused: at once.
    snap = hangar.ok("snapshot", "create", sandbox).stdout.decode().strip()
    hangar.ok("snapshot", "release", snap)
    assert not os.path.exists(snapshot_dir(hangar, snap))


def listed(hangar):
    return {s["id"]: s for s in json.loads(hangar.ok("snapshot", "list", "--json").stdout)}


def test_list_round_trip(hangar, sandbox):
    snap = hangar.ok("snapshot", "create", sandbox, "listed-one").stdout.decode().strip()
    entry = listed(hangar)[snap]
    assert entry["name"] == "listed-one" and entry["sandbox"] == sandbox and entry["provider"] == "local"
    assert entry["released"] is False
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", entry["created_at"]), entry
    text = hangar.ok("snapshot", "list").stdout.decode().splitlines()
    assert text[0].split() == ["SNAPSHOT", "NAME", "SANDBOX", "CREATED", "RELEASED"]
    row = next(line.split() for line in text[1:] if line.startswith(snap))
    assert row[1:3] == ["listed-one", sandbox] and row[4] == "no", row

    child = hangar.ok("sandbox", "create", "--template", snap).stdout.decode().strip()
    hangar.ok("snapshot", "release", snap)
    assert listed(hangar)[snap]["released"] is True
    hangar.ok("sandbox", "kill", child)
    assert snap not in listed(hangar)


def test_list_on_a_provider_without_snapshots(hangar):
    r = hangar("snapshot", "list", "--provider", "no-such-provider")
    assert r.returncode == 1 and r.stdout == b""
    assert "cannot list snapshots" in one_error_line(r)
