"""hangar checkpoint create|list|info|restore|export|blob|delete, end to end on local sandboxes."""

import json
import os
import subprocess

import pytest

KEY = {"HANGAR_SECRET_KEY": "cli checkpoint tests key"}


def sh(hangar, sid, cmd):
    r = hangar.ok("sandbox", "exec", sid, "--", "sh", "-c", cmd, env=KEY)
    return r.stdout.decode()


@pytest.fixture
def repo(hangar, sandbox):
    """A git workspace with a commit, an uncommitted edit, an untracked file and an ignored dir."""
    sh(hangar, sandbox,
       "set -e; cd /workspace; git init -q; git config user.email t@example.org; git config user.name t; "
       "echo one > a.txt; printf 'node_modules/\\n' > .gitignore; git add -A; git commit -qm first; "
       "echo edited >> a.txt; echo new > b.txt; chmod 755 b.txt; mkdir -p node_modules/x; "
       "echo dep > node_modules/x/index.js")
    return sandbox


def create(hangar, sid, *args, input=None):
    r = hangar("checkpoint", "create", sid, *args, env=KEY, input=input)
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    return r.stdout.decode().strip()


def test_create_restore_round_trip(hangar, repo):
    cid = create(hangar, repo, "--session", "s-cli", "--label", "turn=1")
    assert cid and "\n" not in cid

    info = json.loads(hangar.ok("checkpoint", "info", cid, "--json", env=KEY).stdout)
    assert info["id"] == cid
    assert info["session"] == "s-cli"
    assert info["labels"] == {"turn": "1"}
    assert info["selection"] == "git"
    assert info["files"] >= 3
    assert info["stored_bytes"] > 0

    listed = json.loads(hangar.ok("checkpoint", "list", "--session", "s-cli", "--json", env=KEY).stdout)
    assert [c["id"] for c in listed] == [cid]
    assert hangar.ok("checkpoint", "list", "--session", "nobody", "--json", env=KEY).stdout.strip() == b"[]"

    fresh = hangar.ok("sandbox", "create").stdout.decode().strip()
    try:
        hangar.ok("checkpoint", "restore", cid, fresh, env=KEY)
        out = sh(hangar, fresh, "cd /workspace; cat a.txt b.txt; stat -c %a b.txt; git log --format=%s; "
                 "test -e node_modules && echo IGNORED-KEPT || echo ignored-left-out")
        assert out.split("\n")[:6] == ["one", "edited", "new", "755", "first", "ignored-left-out"]
    finally:
        hangar("sandbox", "kill", fresh)


def test_blob_comes_back(hangar, repo):
    conversation = os.urandom(3000)
    cid = create(hangar, repo, "--blob", "-", input=conversation)
    r = hangar.ok("checkpoint", "blob", cid, env=KEY)
    assert r.stdout == conversation


def test_export_is_a_plain_tar_zst(hangar, repo, tmp_path):
    cid = create(hangar, repo)
    out = tmp_path / "cp.tar.zst"
    hangar.ok("checkpoint", "export", cid, str(out), env=KEY)
    names = subprocess.run(["sh", "-c", f"zstd -dc '{out}' | tar -t"], stdout=subprocess.PIPE,
                           check=True).stdout.decode().split()
    assert "a.txt" in names and "b.txt" in names
    assert not any(n.startswith("node_modules") for n in names)
    assert any(n.startswith(".git/") for n in names)


def test_wrong_key_is_refused(hangar, repo):
    cid = create(hangar, repo)
    fresh = hangar.ok("sandbox", "create").stdout.decode().strip()
    try:
        r = hangar("checkpoint", "restore", cid, fresh, env={"HANGAR_SECRET_KEY": "another key"})
        assert r.returncode == 1
        assert b"\n" == r.stderr[-1:] and r.stderr.count(b"\n") == 1, r.stderr
        assert sh(hangar, fresh, "ls -A /workspace") == ""
    finally:
        hangar("sandbox", "kill", fresh)


def test_delete(hangar, repo):
    cid = create(hangar, repo)
    hangar.ok("checkpoint", "delete", cid, env=KEY)
    r = hangar("checkpoint", "info", cid, env=KEY)
    assert r.returncode == 1 and b"no checkpoint" in r.stderr
    r = hangar("checkpoint", "delete", cid, env=KEY)
    assert r.returncode == 1


@pytest.mark.parametrize("args", [["checkpoint"], ["checkpoint", "create"], ["checkpoint", "restore", "c"],
                                  ["checkpoint", "create", "sb", "--label", "novalue"],
                                  ["checkpoint", "create", "sb", "--timeout", "soon"],
                                  ["checkpoint", "export", "c"], ["checkpoint", "info", "a", "b"]])
def test_checkpoint_usage_errors(hangar, args):
    r = hangar(*args)
    assert r.returncode == 2, r.stderr
    assert r.stderr.count(b"\n") == 1 and r.stdout == b""


def test_unknown_checkpoint(hangar):
    r = hangar("checkpoint", "info", "ckpt-doesnotexist", env=KEY)
    assert r.returncode == 1 and b"no checkpoint" in r.stderr
