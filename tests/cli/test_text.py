"""One rule for text: hangar's arguments that are not UTF-8 are refused before
anything is done, and its --json output is valid UTF-8 whatever the store holds."""

import json
import os
import sqlite3
import subprocess

import pytest

# Never UTF-8, an overlong '/', an encoded surrogate.
BAD = [b"\xff\xfe", b"\xc0\xaf", b"\xed\xa0\x80"]


def commands(bad):
    return [
        [b"sandbox", b"info", b"sb-" + bad],
        [b"sandbox", b"exec", b"sb-1", b"--", b"echo " + bad],
        [b"run", b"--env", b"K=" + bad, b"--", b"true"],
        [b"run", b"--cwd", b"/tmp/" + bad, b"--", b"true"],
        [b"run", b"--", b"touch /tmp/x" + bad],
        [b"sandbox", b"create", b"--template", b"base" + bad],
        [b"sandbox", b"create", b"--env", b"K" + bad + b"=v"],
        [b"checkpoint", b"create", b"sb-1", b"--label", b"k=" + bad],
        [b"sandbox", b"cp", b"./a", b"sb-1:/tmp/" + bad],
        [b"environment", b"show", bad],
        [b"session", b"create", b"--id", b"s" + bad],
    ]


CASES = [(i, args) for i, bad in enumerate(BAD) for args in commands(bad)]


@pytest.mark.parametrize("which,args", CASES, ids=lambda v: repr(v) if isinstance(v, list) else str(v))
def test_an_argument_that_is_not_utf8_is_refused(hangar, which, args):
    before = hangar.ids()
    r = subprocess.run([hangar.binary.encode(), *args], env=hangar.env, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, timeout=60)
    assert r.returncode == 2, r.stderr
    assert r.stdout == b""
    err = r.stderr.decode("utf-8")  # strict: the message itself is UTF-8
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("hangar: "), lines
    assert "not valid UTF-8" in lines[0], lines[0]
    assert BAD[which] not in r.stderr
    # Nothing was made.
    assert hangar.ids() == before


def test_valid_utf8_arguments_pass(hangar):
    r = hangar.ok("run", "--env", "GREETING=caf\u00e9 \u2713 \U0001F600", "--", "printf %s \"$GREETING\"")
    assert r.stdout.decode("utf-8") == "caf\u00e9 \u2713 \U0001F600"


def test_json_output_is_utf8_whatever_the_store_holds(hangar, tmp_path):
    """A checkpoint row written by something else, with bytes that are not UTF-8:
    --json writes each as U+FFFD, never raw, and stays one valid JSON value."""
    env = {"HANGAR_STATE_DIR": str(tmp_path)}
    hangar.ok("checkpoint", "list", "--json", env=env)  # makes the store
    db = tmp_path / "hangar.db"
    assert db.exists()
    cid = "ckpt-" + "a" * 26
    with sqlite3.connect(db) as c:
        c.execute(
            "INSERT INTO checkpoints (id, session_id, parent_id, workspace, selection, store_url, content_hash,"
            " labels_json, created_us, stored_bytes, archive_bytes, files, blob_bytes)"
            " VALUES (?, '', '', CAST(? AS TEXT), 'all', 'file:///nowhere', '', CAST(? AS TEXT),"
            " 9007199254740993, 1, 1, 1, 0)",
            (cid, b"/w\xff", b'{"k":"v\xed\xa0\x80"}'),
        )
    for args in (["checkpoint", "list", "--json"], ["checkpoint", "info", cid, "--json"]):
        r = hangar.ok(*args, env=env)
        text = r.stdout.decode("utf-8")  # strict
        doc = json.loads(text)
        row = doc[0] if isinstance(doc, list) else doc
        assert row["id"] == cid
        assert row["workspace"] == "/w\ufffd"
        assert row["labels"] == {"k": "v\ufffd\ufffd\ufffd"}
        # Integers are written exactly, not through a double.
        assert row["created_us"] == 9007199254740993


def test_environments_file_is_strict(hangar, tmp_path):
    for text, clue in (
        (b'{"py": {"tier": "fast", "tier": "heavy"}}', b'duplicate member "tier"'),
        (b'{"py": {}} {"js": {}}', b"follows the value"),
        (b'{"py": {"description": "caf\xc3"}}', b"UTF-8"),
    ):
        bad = tmp_path / "envs.json"
        bad.write_bytes(text)
        for args in (["environment", "list"], ["sandbox", "list"]):
            r = hangar(*args, env={"HANGAR_ENVIRONMENTS_FILE": str(bad)})
            assert r.returncode == 1, (text, args)
            assert b"HANGAR_ENVIRONMENTS_FILE" in r.stderr and clue in r.stderr, r.stderr
            r.stderr.decode("utf-8")


def test_json_setting_is_strict(hangar):
    for value, clue in (
        ('{"fast":["local"],"fast":["e2b"]}', b'duplicate member "fast"'),
        ('{"fast":["local"]} []', b"follows the value"),
    ):
        r = hangar("config", "check", env={"HANGAR_TIERS": value})
        assert r.returncode == 1, r.stderr
        assert b"HANGAR_TIERS" in r.stderr and clue in r.stderr, r.stderr
