"""Access token and /files signatures."""

import base64
import hashlib
import time
import urllib.parse

import pytest

from envdwire import STREAM_CT, UNARY_CT, envelope

AUTH_MESSAGE = "unauthorized access, please provide a valid access token or method signing if supported"


def signature(path, op, user, token, expiration=None):
    """The /files signature, computed here from the documented recipe."""
    parts = [path or "", op, user or "", token]
    if expiration is not None:
        parts.append(str(expiration))
    digest = hashlib.sha256(":".join(parts).encode()).digest()
    return "v1_" + base64.b64encode(digest).decode().rstrip("=")


def files_url(path=None, user=None, sig=None, exp=None):
    q = {}
    if path is not None:
        q["path"] = path
    if user is not None:
        q["username"] = user
    if sig is not None:
        q["signature"] = sig
    if exp is not None:
        q["signature_expiration"] = str(exp)
    return "/files" + ("?" + urllib.parse.urlencode(q) if q else "")


def assert_rest_401(r):
    assert r.status == 401, r
    assert r.headers.get("Content-Type", "").startswith("application/json"), r.headers
    body = r.json()
    assert body["code"] == 401, body
    assert isinstance(body["message"], str) and body["message"], body
    return body


@pytest.fixture
def secured(make_envd):
    return make_envd(token=True)


@pytest.fixture
def secured_file(tmp_path):
    p = tmp_path / "hello.txt"
    p.write_bytes(b"hello from envd\n")
    return str(p)


# ---- X-Access-Token -------------------------------------------------------------


@pytest.mark.parametrize("method,path,ct,body", [
    ("POST", "/process.Process/List", UNARY_CT, b"{}"),
    ("POST", "/process.Process/SendSignal", UNARY_CT, b"{}"),
    ("POST", "/filesystem.Filesystem/Stat", UNARY_CT, b'{"path":"/"}'),
    ("POST", "/process.Process/Start", STREAM_CT, envelope({"process": {"cmd": "/bin/true"}})),
    ("POST", "/process.Process/NoSuchMethod", UNARY_CT, b"{}"),
    ("GET", "/metrics", None, None),
    ("GET", "/envs", None, None),
    ("HEAD", "/health", None, None),
    ("POST", "/files/compose", UNARY_CT, b"{}"),
    ("GET", "/nowhere", None, None),
])
def test_token_required(secured, method, path, ct, body):
    headers = {"Content-Type": ct} if ct else {}
    r = secured.client.request(method, path, body=body, headers=headers, token=None)
    assert r.status == 401, r
    if method != "HEAD":
        body = assert_rest_401(r)
        assert body["message"] == AUTH_MESSAGE


@pytest.mark.parametrize("bad", ["wrong", "", "x" * 64, "prefix-only"])
def test_wrong_token(secured, bad):
    if bad == "prefix-only":
        bad = secured.token[:32]
    r = secured.client.unary("/process.Process/List", {}, token=bad)
    assert_rest_401(r)
    r = secured.client.request("GET", "/metrics", token=bad)
    assert_rest_401(r)


def test_token_longer_than_real(secured):
    r = secured.client.unary("/process.Process/List", {}, token=secured.token + "0")
    assert_rest_401(r)


def test_right_token(secured):
    c = secured.client
    assert c.unary("/process.Process/List", {}).status == 200
    r = c.request("GET", "/metrics")
    assert r.status == 200, r
    m = r.json()
    for k in ("ts", "cpu_count", "cpu_used_pct", "mem_total_mib", "mem_used_mib", "mem_total", "mem_used",
              "mem_cache", "disk_used", "disk_total"):
        assert k in m, m
    r = c.request("GET", "/envs")
    assert r.status == 200, r
    assert isinstance(r.json(), dict)
    status, envs, _ = c.stream("/process.Process/Start", {"process": {"cmd": "/bin/true"}})
    assert status == 200
    assert envs[-1] == (2, {})


def test_health_exempt(secured):
    r = secured.client.request("GET", "/health", token=None)
    assert r.status == 204


def test_token_checked_before_user(secured):
    # The access-token middleware runs first: an unknown Basic user without a token is a 401 REST error.
    from envdwire import basic_user
    r = secured.client.unary("/process.Process/List", {}, token=None,
                             headers={"Authorization": basic_user("no-such-user-here")})
    body = assert_rest_401(r)
    assert body["message"] == AUTH_MESSAGE


def test_no_token_configured_is_open(client):
    assert client.unary("/process.Process/List", {}, token=None).status == 200
    assert client.request("GET", "/metrics", token=None).status == 200
    assert client.unary("/process.Process/List", {}, token="anything").status == 200


def test_token_file_must_be_private(tmp_path):
    import os
    import subprocess
    from conftest import envd_binary
    p = tmp_path / "tok"
    p.write_text("a" * 64)
    os.chmod(p, 0o644)
    r = subprocess.run([envd_binary(), "-addr", "127.0.0.1", "-port", "0", "-token-file", str(p)],
                       stdin=subprocess.DEVNULL, capture_output=True, timeout=10)
    assert r.returncode != 0


# ---- /files signatures ---------------------------------------------------------


def test_files_exempt_from_token_with_signature(secured, secured_file):
    sig = signature(secured_file, "read", None, secured.token)
    r = secured.client.request("GET", files_url(secured_file, sig=sig), token=None)
    assert r.status == 200, r
    assert r.body == b"hello from envd\n"


def test_files_missing_signature(secured, secured_file):
    r = secured.client.request("GET", files_url(secured_file), token=None)
    body = assert_rest_401(r)
    assert "signature" in body["message"]


def test_files_valid_signature_with_expiry(secured, secured_file):
    exp = int(time.time()) + 600
    sig = signature(secured_file, "read", None, secured.token, exp)
    r = secured.client.request("GET", files_url(secured_file, sig=sig, exp=exp), token=None)
    assert r.status == 200, r


def test_files_signature_with_username(secured, secured_file):
    import pwd
    import os
    me = pwd.getpwuid(os.geteuid()).pw_name
    sig = signature(secured_file, "read", me, secured.token)
    r = secured.client.request("GET", files_url(secured_file, user=me, sig=sig), token=None)
    assert r.status == 200, r
    # The same signature without the username in the query no longer matches.
    r = secured.client.request("GET", files_url(secured_file, sig=sig), token=None)
    assert_rest_401(r)


def test_files_wrong_signature(secured, secured_file):
    for sig in [signature(secured_file, "read", None, "not-the-token"),
                signature(secured_file + "x", "read", None, secured.token),
                signature(secured_file, "write", None, secured.token),
                signature(secured_file, "read", None, secured.token) + "=",
                "v1_", "garbage"]:
        r = secured.client.request("GET", files_url(secured_file, sig=sig), token=None)
        assert_rest_401(r)


def test_files_signature_ignores_expiry_param_when_unsigned(secured, secured_file):
    # Signed without expiration but sent with one: the hash input differs, so it fails.
    sig = signature(secured_file, "read", None, secured.token)
    r = secured.client.request("GET", files_url(secured_file, sig=sig, exp=int(time.time()) + 600), token=None)
    assert_rest_401(r)


def test_files_expired_signature(secured, secured_file):
    exp = int(time.time()) - 60
    sig = signature(secured_file, "read", None, secured.token, exp)
    r = secured.client.request("GET", files_url(secured_file, sig=sig, exp=exp), token=None)
    body = assert_rest_401(r)
    assert "expired" in body["message"], body


@pytest.mark.parametrize("exp", ["soon", "12abc", "1.5", "0x10"])
def test_files_non_numeric_expiration(secured, secured_file, exp):
    sig = signature(secured_file, "read", None, secured.token)
    url = "/files?" + urllib.parse.urlencode({"path": secured_file, "signature": sig,
                                              "signature_expiration": exp})
    r = secured.client.request("GET", url, token=None)
    assert r.status == 400, r


def test_files_header_token_wins_over_signature(secured, secured_file):
    sig = signature(secured_file, "read", None, secured.token)
    r = secured.client.request("GET", files_url(secured_file, sig=sig), token="wrong")
    body = assert_rest_401(r)
    assert "does not match" in body["message"], body
    r = secured.client.request("GET", files_url(secured_file), token=secured.token)
    assert r.status == 200, r


def test_files_upload_signature_write(secured, tmp_path):
    target = str(tmp_path / "up.bin")
    read_sig = signature(target, "read", None, secured.token)
    write_sig = signature(target, "write", None, secured.token)
    hdr = {"Content-Type": "application/octet-stream"}
    r = secured.client.request("POST", files_url(target, sig=read_sig), body=b"data", headers=hdr, token=None)
    assert_rest_401(r)
    assert not (tmp_path / "up.bin").exists()
    r = secured.client.request("POST", files_url(target, sig=write_sig), body=b"data", headers=hdr, token=None)
    assert r.status == 200, r
    assert (tmp_path / "up.bin").read_bytes() == b"data"


def test_files_no_signature_needed_without_token(client, secured_file):
    r = client.request("GET", files_url(secured_file), token=None)
    assert r.status == 200, r
    assert r.body == b"hello from envd\n"
