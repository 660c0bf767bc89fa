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
    for text, word in [('{"py": {"gpu": "x"}}', b"gpu"), ('{"py": {"image": "a b"}}', b"image"),
                       ('{"py": {"image": ""}}', b"image"), ('{"py": {"image": 7}}', b"image"),
                       ('{"py": {"image": "-rm"}}', b"image")]:
        bad.write_text(text)
        for args in (["environment", "list"], ["sandbox", "list"], ["config", "check"]):
            r = hangar(*args, env={"HANGAR_ENVIRONMENTS_FILE": str(bad)})
            assert r.returncode == 1, (text, args)
            assert b"HANGAR_ENVIRONMENTS_FILE" in r.stderr and word in r.stderr, r.stderr


def test_no_file_is_an_empty_list(hangar, tmp_path):
    r = hangar.ok("environment", "list", "--json", env={"XDG_CONFIG_HOME": str(tmp_path)})
    assert json.loads(r.stdout) == []


# ---- environments with an image: publish, then create ----------------------------

from test_platform import fake_cloud  # noqa: E402,F401  (a fixture)

DIGEST = "sha256:" + "ab" * 32


@pytest.fixture
def image_envs(tmp_path, fake_cloud):  # noqa: F811
    path = tmp_path / "environments.json"
    path.write_text(json.dumps({
        "app": {"tier": "heavy", "image": "registry.example/team/app:1"},
        "pinned": {"tier": "heavy", "image": "registry.example/team/app@" + DIGEST},
        "same": {"tier": "heavy", "image": "mirror.example/app:1.0@" + DIGEST},
        "named": {"tier": "heavy", "image": "registry.example/team/app:1", "templates": {"e2b": "base"}},
        "plain": {"tier": "heavy"},
        "unpublished": {"tier": "heavy", "image": "registry.example/other:2"},
    }))
    env = dict(fake_cloud)
    env.update({"HANGAR_ENVIRONMENTS_FILE": str(path), "HANGAR_TIERS": '{"heavy":["e2b"]}',
                "HANGAR_STATE_DIR": str(tmp_path / "state")})
    return env


def publish(hangar, name, env, *extra):
    return json.loads(hangar.ok("environment", "publish", name, "--json", *extra, env=env).stdout)


def templates(hangar, env):
    out = hangar.ok("template", "list", "--provider", "e2b", env=env).stdout.decode().splitlines()
    return sorted(line.split()[0] for line in out[1:])


def test_publish_builds_once_and_creates_use_it(hangar, image_envs):
    env = image_envs
    info = json.loads(hangar.ok("environment", "show", "app", "--json", env=env).stdout)
    assert info["image"] == "registry.example/team/app:1"
    # Before the publish a create says what to do, and builds nothing.
    before = templates(hangar, env)
    r = hangar("sandbox", "create", "--environment", "app", env=env)
    assert r.returncode == 1 and b"hangar environment publish app" in r.stderr, r.stderr
    assert templates(hangar, env) == before
    first = publish(hangar, "app", env)
    assert [(x["provider"], x["action"]) for x in first] == [("e2b", "built")], first
    tid = first[0]["template"]
    assert tid and tid in templates(hangar, env)
    # Again: nothing built, the same template.
    again = publish(hangar, "app", env)
    assert [(x["action"], x["template"]) for x in again] == [("reused", tid)]
    assert len(templates(hangar, env)) == len(before) + 1
    # A create from the environment runs on that template.
    sid = hangar.ok("sandbox", "create", "--environment", "app", env=env).stdout.decode().strip()
    try:
        got = json.loads(hangar.ok("sandbox", "info", sid, "--json", env=env).stdout)
        assert got["template"] == tid, got
    finally:
        hangar.ok("sandbox", "kill", sid, env=env)
    # --rebuild builds again (the platform rebuilds the template of that name in place).
    rebuilt = publish(hangar, "app", env, "--rebuild")
    assert rebuilt[0]["action"] == "built" and rebuilt[0]["template"] in templates(hangar, env)
    assert len(templates(hangar, env)) == len(before) + 1


def test_one_digest_is_built_once_under_two_references(hangar, image_envs):
    env = image_envs
    pinned = publish(hangar, "pinned", env)
    assert pinned[0]["action"] == "built" and pinned[0]["digest"] == DIGEST
    same = publish(hangar, "same", env)
    assert same[0]["action"] == "reused" and same[0]["template"] == pinned[0]["template"], same


def test_publish_says_what_it_cannot_do(hangar, image_envs):
    env = image_envs
    named = publish(hangar, "named", env)
    assert [(x["action"], x["template"]) for x in named] == [("named", "base")]
    r = hangar("environment", "publish", "plain", env=env)
    assert r.returncode == 1 and b"names no image" in r.stderr, r.stderr
    r = hangar("environment", "publish", "nope", env=env)
    assert r.returncode == 1 and b"no environment nope" in r.stderr, r.stderr
    # A provider that can do nothing with an image is a failed entry, and exit 1.
    env2 = dict(env, HANGAR_TIERS='{"heavy":["local"]}')
    r = hangar("environment", "publish", "unpublished", "--json", env=env2)
    out = json.loads(r.stdout)
    assert r.returncode == 1 and out[0]["provider"] == "local" and out[0]["action"] in ("failed", "image"), out
