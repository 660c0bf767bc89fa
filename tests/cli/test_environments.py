"""hangar environment list|show and --environment on run and sandbox create."""

import json

import pytest

ENVS = {
    "zeta": {"description": "the last one"},
    "py": {
        "description": "Python",
        "tier": "default",
        "templates": {"e2b": "python-3-12"},
        "env": {"GREETING": "from-the-environment", "OTHER": "kept"},
        "timeout_sec": 900,
        "network": "off",
        "workspace": "/workspace",
        "user": "user",
    },
}


@pytest.fixture
def envs(tmp_path):
    path = tmp_path / "environments.json"
    path.write_text(json.dumps(ENVS))
    return {"HANGAR_ENVIRONMENTS_FILE": str(path)}


def test_list_and_show(hangar, envs):
    listed = json.loads(hangar.ok("environment", "list", "--json", env=envs).stdout)
    assert [e["name"] for e in listed] == ["py", "zeta"]
    py = json.loads(hangar.ok("environment", "show", "py", "--json", env=envs).stdout)
    assert py["templates"] == ENVS["py"]["templates"]
    assert py["env"] == ENVS["py"]["env"]
    assert py["timeout_sec"] == 900 and py["network"] == "off" and py["tier"] == "default"
    table = hangar.ok("environment", "list", env=envs).stdout.decode().splitlines()
    assert table[0].split()[:3] == ["NAME", "TIER", "TEMPLATES"]
    assert [line.split()[0] for line in table[1:]] == ["py", "zeta"]
    text = hangar.ok("environment", "show", "zeta", env=envs).stdout.decode()
    assert "description: the last one" in text.splitlines()


def test_unknown_environment(hangar, envs):
    r = hangar("environment", "show", "nope", env=envs)
    assert r.returncode == 1 and r.stderr.count(b"\n") == 1 and b"nope" in r.stderr
    r = hangar("run", "--environment", "nope", "--", "true", env=envs)
    assert r.returncode == 1 and b"nope" in r.stderr


def test_run_takes_the_environment_variables(hangar, envs):
    r = hangar.ok("run", "--environment", "py", "--env", "OTHER=from-the-command", "--",
                  "echo $GREETING $OTHER", env=envs)
    assert r.stdout.decode().split() == ["from-the-environment", "from-the-command"]


def test_sandbox_create_takes_the_lifetime(hangar, envs):
    sid = hangar.ok("sandbox", "create", "--environment", "py", env=envs).stdout.decode().strip()
    try:
        info = json.loads(hangar.ok("sandbox", "info", sid, "--json").stdout)
        from datetime import datetime
        fmt = "%Y-%m-%dT%H:%M:%SZ"
        life = datetime.strptime(info["expires_at"], fmt) - datetime.strptime(info["created_at"], fmt)
        assert 890 <= life.total_seconds() <= 910, info
        out = hangar.ok("sandbox", "exec", sid, "--", "echo $GREETING").stdout.decode()
        assert out.strip() == "from-the-environment"
    finally:
        hangar("sandbox", "kill", sid)


def test_a_broken_file_fails_every_command_naming_it(hangar, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"py": {"image": "x"}}')
    for args in (["environment", "list"], ["sandbox", "list"], ["config", "check"]):
        r = hangar(*args, env={"HANGAR_ENVIRONMENTS_FILE": str(bad)})
        assert r.returncode == 1, args
        assert b"HANGAR_ENVIRONMENTS_FILE" in r.stderr and b"image" in r.stderr, r.stderr


def test_no_file_is_an_empty_list(hangar, tmp_path):
    r = hangar.ok("environment", "list", "--json", env={"XDG_CONFIG_HOME": str(tmp_path)})
    assert json.loads(r.stdout) == []
