"""POST /hangar/v1/token with variables: how a pooled sandbox's envd is claimed.

The new token and the caller's variables take effect together or not at
all; the body is strict JSON, {"env": ["KEY=VALUE", ...]}, and anything
else is refused with a clear status while the daemon keeps its token.
"""

import json

import pytest

from envdwire import RawConn, raw_request_bytes
from test_process import run, sh, stdout_of

TOKEN = "/hangar/v1/token"


def claim(d, new, body=b"", content_type="application/json", token=...):
    headers = {"X-Hangar-New-Token": new}
    if content_type:
        headers["Content-Type"] = content_type
    return d.client.request("POST", TOKEN, body=body, headers=headers, token=token)


def env_body(*entries):
    return json.dumps({"env": list(entries)}).encode()


def test_claim_sets_token_and_variables(make_envd):
    d = make_envd(token=True, env={"CI": "true", "KEEP": "daemon"})
    old = d.client.token
    r = claim(d, "caller-token", env_body("FOO=bar baz", "KEEP=caller", "EMPTY="))
    assert r.status == 204, r
    assert d.client.request("GET", "/envs", token=old).status == 401
    d.client.token = "caller-token"
    envs = d.client.request("GET", "/envs").json()
    assert envs == {"CI": "true", "KEEP": "caller", "FOO": "bar baz", "EMPTY": ""}
    evs, err = run(d.client, sh('echo "$FOO|$KEEP|$CI"'))
    assert err is None
    assert stdout_of(evs) == b"bar baz|caller|true\n"
    # Once in the daemon's life: a second claim changes neither.
    r = claim(d, "third-token", env_body("FOO=again"))
    assert r.status == 409, r
    assert d.client.request("GET", "/envs").json()["FOO"] == "bar baz"


def test_claim_without_body_keeps_variables(make_envd):
    d = make_envd(token=True, env={"CI": "true"})
    r = claim(d, "caller-token", content_type=None)
    assert r.status == 204, r
    d.client.token = "caller-token"
    assert d.client.request("GET", "/envs").json() == {"CI": "true"}


BAD_BODIES = [
    b"not json",
    b'{"env": ["FOO=1"]} trailing',
    b'{"env": "FOO=1"}',
    b'{"env": [1]}',
    b'{"env": ["NOVALUE"]}',
    b'{"env": ["=value"]}',
    b'{"env": ["FOO=a\\u0000b"]}',
    b'{"env": ["FOO=1"], "env": ["BAR=2"]}',
    b'{"env": ["FOO=1"], "more": 1}',
    b'["FOO=1"]',
    b'{"env": ["FOO=\xff"]}',
    env_body("BIG=" + "x" * 32765),
]


@pytest.mark.parametrize("body", BAD_BODIES, ids=range(len(BAD_BODIES)))
def test_bad_variables_refused_token_kept(make_envd, body):
    d = make_envd(token=True)
    r = claim(d, "caller-token", body)
    assert r.status == 400, r
    assert r.json()["message"].startswith("bad variables: "), r
    # Nothing took effect: the old token still works, the new one does not.
    assert d.client.request("GET", "/envs").json() == {}
    assert d.client.request("GET", "/envs", token="caller-token").status == 401


def test_longest_variable_accepted(make_envd):
    d = make_envd(token=True)
    assert claim(d, "caller-token", env_body("BIG=" + "x" * 32764)).status == 204


def test_variables_not_json_refused(make_envd):
    d = make_envd(token=True)
    r = claim(d, "caller-token", b"FOO=1\0", content_type="application/octet-stream")
    assert r.status == 415, r
    assert d.client.request("GET", "/envs").status == 200


def claim_head(d, extra):
    headers = {"X-Access-Token": d.client.token, "X-Hangar-New-Token": "caller-token",
               "Content-Type": "application/json"}
    headers.update(extra)
    return raw_request_bytes("POST", TOKEN, headers, body=None)


def test_body_declared_over_the_bound_refused_at_once(make_envd):
    d = make_envd(token=True)
    rc = RawConn(d.port, timeout=10)
    try:
        rc.send(claim_head(d, {"Content-Length": str((2 << 20) + 1)}))
        status, _ = rc.read_head()
    finally:
        rc.close()
    assert status == 413
    assert d.client.request("GET", "/envs").status == 200


def test_chunked_body_over_the_bound_refused(make_envd):
    d = make_envd(token=True)
    chunk = b"x" * 65536
    rc = RawConn(d.port, timeout=30)
    try:
        rc.send(claim_head(d, {"Transfer-Encoding": "chunked"}))
        for _ in range(33):
            rc.send(b"%x\r\n%s\r\n" % (len(chunk), chunk))
        rc.send(b"0\r\n\r\n")
        status, _ = rc.read_head()
    finally:
        rc.close()
    assert status == 413
    assert d.client.request("GET", "/envs").status == 200


def test_claim_needs_the_token_in_force(make_envd):
    d = make_envd(token=True)
    r = claim(d, "caller-token", env_body("FOO=1"), token="wrong")
    assert r.status == 401, r
    assert d.client.request("GET", "/envs").json() == {}
