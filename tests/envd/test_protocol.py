"""Connect protocol edges the SDKs never exercise."""

import json
import struct

import pytest

from envdwire import (FLAG_COMPRESSED, FLAG_END_STREAM, STREAM_CT, UNARY_CT, RawConn, basic_user,
                      end_error, envelope, events, raw_request_bytes)

LIST = "/process.Process/List"
START = "/process.Process/Start"
CONNECT = "/process.Process/Connect"
MAX_BODY = 16 << 20


def assert_connect_error(r, status, code):
    """A unary Connect error: HTTP status, JSON body with the snake_case code."""
    assert r.status == status, r
    assert r.headers.get("Content-Type", "").startswith("application/json"), r.headers
    body = r.json()
    assert body["code"] == code, body
    assert isinstance(body.get("message", ""), str)
    return body


def assert_stream_error(status, envs, code):
    """A stream that failed: still HTTP 200, error only in the end-stream envelope."""
    assert status == 200
    err = end_error(envs)
    assert err is not None, envs
    assert err["code"] == code, err
    return err


def no_start(envs):
    return not any(k == "start" for k, _ in events(envs))


# ---- routes and methods -----------------------------------------------------


def test_health(client):
    r = client.request("GET", "/health")
    assert r.status == 204
    assert r.body == b""
    assert r.headers.get("Cache-Control") == "no-store"


@pytest.mark.parametrize("method,path", [
    ("GET", "/nope"),
    ("POST", "/nope"),
    ("GET", "/process.Process"),
    ("POST", "/process.Process/Nope"),
    ("POST", "/filesystem.Filesystem/Nope"),
    ("POST", "/process.process/List"),
    ("POST", "/process.Process/List/extra"),
    ("GET", "/health/x"),
])
def test_unknown_route_404(client, method, path):
    r = client.request(method, path, body=b"{}" if method == "POST" else None,
                       headers={"Content-Type": UNARY_CT})
    assert r.status == 404, r


@pytest.mark.parametrize("method", ["GET", "PUT", "DELETE", "PATCH"])
@pytest.mark.parametrize("rpc", [LIST, START])
def test_wrong_method_405(client, method, rpc):
    r = client.request(method, rpc)
    assert r.status == 405, r
    allow = [m.strip() for m in r.headers.get("Allow", "").split(",")]
    assert "POST" in allow, r.headers


@pytest.mark.parametrize("rpc,ct", [
    (LIST, "text/plain"),
    (LIST, "application/proto-json"),
    (LIST, STREAM_CT),            # streaming type on a unary method
    (LIST, None),
    (START, UNARY_CT),            # unary type on a streaming method
    (START, "application/grpc"),
    (START, "application/grpc-web+json"),
])
def test_wrong_content_type_415(client, rpc, ct):
    headers = {"Content-Type": ct} if ct else {}
    r = client.request("POST", rpc, body=b"{}", headers=headers)
    assert r.status == 415, r


def test_content_type_parameters_accepted(client):
    r = client.unary(LIST, {}, content_type="application/json; charset=utf-8")
    assert r.status == 200, r


def test_cors_preflight(client):
    r = client.request("OPTIONS", LIST, headers={
        "Origin": "https://example.test",
        "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "content-type,connect-protocol-version",
    })
    assert r.status in (200, 204), r
    assert r.headers.get("Access-Control-Allow-Origin") == "*"
    assert "POST" in r.headers.get("Access-Control-Allow-Methods", "")


# ---- unary framing ------------------------------------------------------------


def test_unary_list_ok(client):
    r = client.unary(LIST, {}, headers={"Connect-Protocol-Version": "1", "Connect-Timeout-Ms": "60000"})
    assert r.status == 200, r
    assert r.headers.get("Content-Type", "").startswith("application/json")
    body = r.json()
    assert isinstance(body, dict)
    assert isinstance(body.get("processes", []), list)


def test_unary_unknown_fields_ignored(client):
    r = client.unary(LIST, {"noSuchField": [1, 2, {"x": None}], "another_one": "y"})
    assert r.status == 200, r


@pytest.mark.parametrize("body", [b"{", b"not json", b"[1,2]", b"\"str\"", b"{\"a\":}", b"\xff\xfe"])
def test_unary_malformed_json_400(client, body):
    r = client.unary(LIST, body)
    assert_connect_error(r, 400, "invalid_argument")


@pytest.mark.parametrize("body, why", [
    (b'{"process":{"pid":1},"process":{"pid":2}}', 'duplicate member "process"'),
    (b'{} {}', "data follows the value"),
    (b'{"process":{"tag":"a\\u0000b"}}', "at /process/tag"),
    (b'{"process":{"tag":"\\udc00"}}', "surrogate"),
    (b'{"process":{"tag":"\xed\xa0\x80"}}', "not valid UTF-8"),
])
def test_unary_json_is_strict(client, body, why):
    # cJSON alone would take the first "process", a tag cut at the NUL, or
    # the bytes as they are: each is refused, saying where.
    r = client.unary(LIST, body)
    assert why in assert_connect_error(r, 400, "invalid_argument")["message"], r


def test_stream_json_is_strict(client):
    status, envs, _ = client.stream(START, body=envelope(b'{"process":{"cmd":"/bin/true","cmd":"/bin/false"}}'))
    assert_stream_error(status, envs, "invalid_argument")
    assert no_start(envs)


def test_unary_connect_protocol_version_2(client):
    r = client.unary(LIST, {}, headers={"Connect-Protocol-Version": "2"})
    assert_connect_error(r, 400, "invalid_argument")


@pytest.mark.parametrize("value", ["abc", "12345678901", "-5", "1.5", "10ms", ""])
def test_unary_bad_timeout_header(client, value):
    r = client.unary(LIST, {}, headers={"Connect-Timeout-Ms": value})
    assert_connect_error(r, 400, "invalid_argument")


def test_unary_oversized_body(client):
    body = b'{"pad":"' + b"a" * MAX_BODY + b'"}'
    r = client.unary(LIST, body)
    assert_connect_error(r, 429, "resource_exhausted")


def test_unary_body_at_limit_accepted(client):
    pad = MAX_BODY - len(b'{"pad":""}')
    r = client.unary(LIST, b'{"pad":"' + b"a" * pad + b'"}')
    assert r.status == 200, r


def test_unknown_basic_user_unary(client):
    r = client.unary(LIST, {}, headers={"Authorization": basic_user("no-such-user-here")})
    body = assert_connect_error(r, 401, "unauthenticated")
    assert "no-such-user-here" in body.get("message", "")


def test_send_signal_unknown_pid(client):
    r = client.unary("/process.Process/SendSignal",
                     {"process": {"pid": 999999}, "signal": "SIGNAL_SIGTERM"})
    assert_connect_error(r, 404, "not_found")


def test_send_input_unknown_pid(client):
    r = client.unary("/process.Process/SendInput",
                     {"process": {"pid": 999999}, "input": {"stdin": "aGk="}})
    assert_connect_error(r, 404, "not_found")


# ---- stream framing -------------------------------------------------------------


def test_stream_malformed_json(client):
    status, envs, _ = client.stream(START, body=envelope(b"{not json"))
    assert_stream_error(status, envs, "invalid_argument")
    assert no_start(envs)


def test_stream_truncated_envelope(client):
    msg = json.dumps({"process": {"cmd": "/bin/true"}}).encode()
    body = struct.pack(">BI", 0, len(msg) + 50) + msg
    status, envs, _ = client.stream(START, body=body)
    assert_stream_error(status, envs, "invalid_argument")
    assert no_start(envs)


def test_stream_truncated_header(client):
    status, envs, _ = client.stream(START, body=b"\x00\x00\x00")
    assert_stream_error(status, envs, "invalid_argument")


def test_stream_empty_body(client):
    status, envs, _ = client.stream(START, body=b"")
    assert_stream_error(status, envs, "invalid_argument")


def test_stream_two_envelopes(client):
    one = envelope({"process": {"cmd": "/bin/true"}})
    status, envs, _ = client.stream(START, body=one + one)
    assert_stream_error(status, envs, "invalid_argument")
    assert no_start(envs)


def test_stream_compressed_flag(client):
    body = envelope({"process": {"cmd": "/bin/true"}}, flags=FLAG_COMPRESSED)
    status, envs, _ = client.stream(START, body=body)
    assert status == 200
    err = end_error(envs)
    # Nothing was negotiated, so a compressed message cannot be read.
    assert err is not None and err["code"] in ("invalid_argument", "internal", "unimplemented"), envs
    assert no_start(envs)


def test_stream_end_flag_in_request(client):
    body = envelope({"process": {"cmd": "/bin/true"}}, flags=FLAG_END_STREAM)
    status, envs, _ = client.stream(START, body=body)
    assert status == 200
    assert end_error(envs) is not None
    assert no_start(envs)


def test_stream_unknown_flag_bits(client):
    body = envelope({"process": {"cmd": "/bin/true"}}, flags=0x80)
    status, envs, _ = client.stream(START, body=body)
    assert_stream_error(status, envs, "invalid_argument")


def test_stream_oversized_body(client):
    msg = b'{"pad":"' + b"a" * MAX_BODY + b'"}'
    status, envs, _ = client.stream(START, body=envelope(msg))
    assert_stream_error(status, envs, "resource_exhausted")


def test_stream_oversized_envelope_claim(client):
    # The header claims 1 GiB; the body is small. Must not allocate or wait for it.
    body = struct.pack(">BI", 0, 1 << 30) + b"{}"
    status, envs, _ = client.stream(START, body=body)
    assert status == 200
    assert end_error(envs) is not None


def test_stream_connect_protocol_version_2(client):
    status, envs, _ = client.stream(START, {"process": {"cmd": "/bin/true"}},
                                    headers={"Connect-Protocol-Version": "2"})
    assert_stream_error(status, envs, "invalid_argument")
    assert no_start(envs)


def test_stream_bad_timeout_header(client):
    status, envs, _ = client.stream(START, {"process": {"cmd": "/bin/true"}},
                                    headers={"Connect-Timeout-Ms": "soon"})
    assert_stream_error(status, envs, "invalid_argument")
    assert no_start(envs)


def test_stream_unknown_basic_user(client):
    status, envs, _ = client.stream(START, {"process": {"cmd": "/bin/true"}},
                                    headers={"Authorization": basic_user("no-such-user-here")})
    assert_stream_error(status, envs, "unauthenticated")
    assert no_start(envs)


def test_connect_unknown_pid_is_200_with_error(client):
    status, envs, _ = client.stream(CONNECT, {"process": {"pid": 999999}})
    err = assert_stream_error(status, envs, "not_found")
    assert len(envs) == 1
    assert "999999" in err.get("message", "")


def test_stream_input_unimplemented(client):
    body = envelope({"start": {"process": {"pid": 1}}})
    status, envs, raw = client.stream("/process.Process/StreamInput", body=body)
    assert_stream_error(status, envs, "unimplemented")


def test_stream_response_headers(client):
    call = client.open_stream(START, {"process": {"cmd": "/bin/true"}})
    with call:
        assert call.status == 200
        assert call.content_type.startswith(STREAM_CT)
        envs = list(call.envelopes())
    assert end_error(envs) is None
    kinds = [k for k, _ in events(envs)]
    assert kinds[0] == "start" and kinds[-1] == "end", kinds


def test_stream_request_chunked(envd):
    # The Python SDK sends streaming requests with Transfer-Encoding: chunked.
    rc = RawConn(envd.port)
    try:
        env = envelope({"process": {"cmd": "/bin/echo", "args": ["chunked"]}})
        head = raw_request_bytes("POST", START, {"Content-Type": STREAM_CT, "Transfer-Encoding": "chunked"}, None)
        chunks = b"".join(b"%x\r\n%s\r\n" % (len(env[i:i + 3]), env[i:i + 3]) for i in range(0, len(env), 3))
        rc.send(head + chunks + b"0\r\n\r\n")
        status, headers = rc.read_head()
        assert status == 200
        from envdwire import ChunkedReader, b64
        reader = ChunkedReader(rc)
        envs = []
        while True:
            e = reader.next_envelope()
            if e is None:
                break
            envs.append(e)
        assert end_error(envs) is None
        data = [b for k, b in events(envs) if k == "data"]
        assert data and data[0]["stdout"] == b64(b"chunked\n")
    finally:
        rc.close()


def test_keepalive_connection_reuse(envd):
    # Several calls over one HTTP/1.1 connection, unary and streaming.
    import http.client
    conn = http.client.HTTPConnection("127.0.0.1", envd.port, timeout=30)
    try:
        for _ in range(3):
            conn.request("POST", LIST, body=b"{}", headers={"Content-Type": UNARY_CT})
            r = conn.getresponse()
            r.read()
            assert r.status == 200
            conn.request("POST", START, body=envelope({"process": {"cmd": "/bin/true"}}),
                         headers={"Content-Type": STREAM_CT})
            r = conn.getresponse()
            body = r.read()
            assert r.status == 200
            assert body[-7:] == b"\x02\x00\x00\x00\x02{}", body[-20:]
    finally:
        conn.close()
