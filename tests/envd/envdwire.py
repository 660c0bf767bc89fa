"""Connect-over-HTTP/1.1 helpers for talking to hangar-envd at the wire level.

Two transports: http.client (for ordinary requests) and hand-written HTTP on a
raw socket (for requests http.client would refuse to send, and for clients
that vanish mid-stream). Nothing here knows what the daemon should answer;
the tests decide that.
"""

import base64
import http.client
import json
import os
import select
import socket
import struct
import time

FLAG_COMPRESSED = 0x01
FLAG_END_STREAM = 0x02

UNARY_CT = "application/json"
STREAM_CT = "application/connect+json"


def envelope(payload, flags=0):
    """One Connect envelope: flag byte, 4-byte big-endian length, payload."""
    if isinstance(payload, (dict, list)):
        payload = json.dumps(payload).encode()
    elif isinstance(payload, str):
        payload = payload.encode()
    return struct.pack(">BI", flags, len(payload)) + payload


def b64(data):
    return base64.b64encode(data).decode()


def basic_user(name):
    """Authorization header value naming a run-as user, as the SDKs send it."""
    return "Basic " + base64.b64encode((name + ":").encode()).decode()


class Deadline:
    """Polling helper: `while d.pending(): ...` for at most `seconds`."""

    def __init__(self, seconds):
        self.end = time.monotonic() + seconds

    def remaining(self):
        return max(0.0, self.end - time.monotonic())

    def expired(self):
        return time.monotonic() >= self.end


def poll(cond, seconds, interval=0.05, what="condition"):
    """Calls cond() until it returns a truthy value or the deadline passes."""
    d = Deadline(seconds)
    while True:
        v = cond()
        if v:
            return v
        if d.expired():
            raise AssertionError(f"timed out after {seconds}s waiting for {what}")
        time.sleep(min(interval, d.remaining()))


def read_ready(fd, proc, seconds):
    """The port a daemon started with -ready-fd reports on fd ("ready PORT\\n") within seconds.

    Raises AssertionError saying why not: no line in time, or proc exited first.
    """
    deadline = time.monotonic() + seconds
    data = b""
    while not data.endswith(b"\n"):
        left = deadline - time.monotonic()
        if left <= 0:
            raise AssertionError(f"hangar-envd did not report ready within {seconds}s")
        r, _, _ = select.select([fd], [], [], left)
        if not r:
            continue
        chunk = os.read(fd, 64)
        if not chunk:
            proc.wait(timeout=5)
            raise AssertionError(f"hangar-envd exited ({proc.returncode}) before ready")
        data += chunk
    words = data.decode().split()
    assert words[0] == "ready" and len(words) == 2, data
    return int(words[1])


class Response:
    def __init__(self, status, headers, body):
        self.status = status
        self.headers = headers  # http.client.HTTPMessage (case-insensitive)
        self.body = body

    def json(self):
        return json.loads(self.body)

    def __repr__(self):
        return f"<Response {self.status} {self.body[:200]!r}>"


class Client:
    """A daemon at 127.0.0.1:port, optionally with an access token."""

    def __init__(self, port, token=None, timeout=30):
        self.port = port
        self.token = token
        self.timeout = timeout

    def _headers(self, extra, token):
        h = {}
        tok = self.token if token is ... else token
        if tok is not None:
            h["X-Access-Token"] = tok
        if extra:
            h.update(extra)
        return h

    def request(self, method, path, body=None, headers=None, token=..., timeout=None):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout or self.timeout)
        try:
            conn.request(method, path, body=body, headers=self._headers(headers, token))
            r = conn.getresponse()
            return Response(r.status, r.headers, r.read())
        finally:
            conn.close()

    def unary(self, rpc, msg, headers=None, token=..., content_type=UNARY_CT):
        """POSTs a unary Connect call; msg is a dict (JSON-encoded) or raw bytes."""
        body = msg if isinstance(msg, (bytes, bytearray)) else json.dumps(msg).encode()
        h = {"Content-Type": content_type}
        if headers:
            h.update(headers)
        return self.request("POST", rpc, body=body, headers=h, token=token)

    def open_stream(self, rpc, msg=None, body=None, headers=None, token=..., timeout=None):
        """Starts a server-stream call and returns a StreamCall to read from."""
        if body is None:
            body = envelope(msg)
        h = {"Content-Type": STREAM_CT}
        if headers:
            h.update(headers)
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout or self.timeout)
        conn.request("POST", rpc, body=body, headers=self._headers(h, token))
        return StreamCall(conn, conn.getresponse())

    def stream(self, rpc, msg=None, body=None, headers=None, token=..., timeout=None):
        """A whole server-stream call: (status, [(flags, obj)], raw body if not a stream)."""
        call = self.open_stream(rpc, msg, body=body, headers=headers, token=token, timeout=timeout)
        with call:
            if call.status != 200 or not call.content_type.startswith(STREAM_CT):
                return call.status, [], call.resp.read()
            return call.status, list(call.envelopes()), b""

    def health(self, timeout=5):
        try:
            return self.request("GET", "/health", token=None, timeout=timeout).status
        except OSError:
            return None

    def list_pids(self):
        r = self.unary("/process.Process/List", {})
        assert r.status == 200, r
        return {p["pid"] for p in r.json().get("processes", [])}


class StreamCall:
    """An open server-stream response, read envelope by envelope."""

    def __init__(self, conn, resp):
        self.conn = conn
        self.resp = resp
        self.status = resp.status
        self.content_type = resp.getheader("Content-Type", "")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        self.conn.close()

    def _exact(self, n):
        data = self.resp.read(n)
        return data

    def next_raw(self):
        """(flags, payload bytes), or None at a clean end of body. Raises on a torn envelope."""
        hdr = self._exact(5)
        if not hdr:
            return None
        if len(hdr) < 5:
            raise AssertionError(f"stream ended inside an envelope header ({len(hdr)} bytes)")
        flags, length = struct.unpack(">BI", hdr)
        payload = self._exact(length) if length else b""
        if len(payload) != length:
            raise AssertionError(f"stream ended inside an envelope ({len(payload)} of {length} bytes)")
        return flags, payload

    def next(self):
        raw = self.next_raw()
        if raw is None:
            return None
        flags, payload = raw
        return flags, json.loads(payload)

    def envelopes(self):
        while True:
            e = self.next()
            if e is None:
                return
            yield e


def end_error(envs):
    """Asserts envs ends with exactly one end-stream envelope; returns its error (or None)."""
    assert envs, "no envelopes at all"
    ends = [i for i, (f, _) in enumerate(envs) if f & FLAG_END_STREAM]
    assert ends == [len(envs) - 1], f"end-stream envelope misplaced: flags {[f for f, _ in envs]}"
    last = envs[-1][1]
    assert set(last) <= {"error", "metadata"}, last
    return last.get("error")


def events(envs):
    """The process events of a Start/Connect stream, as (kind, body) pairs."""
    out = []
    for flags, obj in envs:
        if flags & FLAG_END_STREAM:
            continue
        ev = obj["event"]
        assert len(ev) == 1, obj
        (kind, body), = ev.items()
        out.append((kind, body))
    return out


# ---- raw socket HTTP ------------------------------------------------------


class RawConn:
    """A hand-driven HTTP/1.1 connection."""

    def __init__(self, port, timeout=30):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.buf = b""

    def send(self, data):
        self.sock.sendall(data)

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass

    def abort(self):
        """Closes with a reset, the way a killed client disappears."""
        try:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        except OSError:
            pass
        self.close()

    def _fill(self):
        chunk = self.sock.recv(65536)
        if not chunk:
            raise EOFError("connection closed")
        self.buf += chunk

    def read_exact(self, n):
        while len(self.buf) < n:
            self._fill()
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def read_line(self):
        while b"\r\n" not in self.buf:
            self._fill()
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def read_head(self):
        """(status, {lower-case name: value})."""
        status_line = self.read_line().decode()
        parts = status_line.split(" ", 2)
        status = int(parts[1])
        headers = {}
        while True:
            line = self.read_line()
            if not line:
                break
            k, v = line.decode().split(":", 1)
            headers[k.strip().lower()] = v.strip()
        return status, headers


def raw_request_bytes(method, path, headers, body=b""):
    lines = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1"]
    for k, v in headers.items():
        lines.append(f"{k}: {v}")
    if body is not None and "Content-Length" not in headers and "Transfer-Encoding" not in headers:
        lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + (body or b"")


class ChunkedReader:
    """Reads a chunked body off a RawConn, chunk by chunk."""

    def __init__(self, rc):
        self.rc = rc
        self.pending = b""
        self.done = False

    def read(self, n):
        while len(self.pending) < n and not self.done:
            size = int(self.rc.read_line().split(b";")[0], 16)
            if size == 0:
                while self.rc.read_line():
                    pass
                self.done = True
                break
            self.pending += self.rc.read_exact(size)
            self.rc.read_exact(2)
        out, self.pending = self.pending[:n], self.pending[n:]
        return out

    def next_envelope(self):
        hdr = self.read(5)
        if not hdr:
            return None
        assert len(hdr) == 5, "torn envelope header"
        flags, length = struct.unpack(">BI", hdr)
        payload = self.read(length)
        assert len(payload) == length, "torn envelope"
        return flags, json.loads(payload)


def raw_stream(port, rpc, msg, headers=None, token=None, timeout=30):
    """Starts a server stream over a raw socket; returns (RawConn, status, headers, ChunkedReader)."""
    h = {"Content-Type": STREAM_CT}
    if token is not None:
        h["X-Access-Token"] = token
    if headers:
        h.update(headers)
    rc = RawConn(port, timeout=timeout)
    rc.send(raw_request_bytes("POST", rpc, h, envelope(msg)))
    status, rh = rc.read_head()
    assert rh.get("transfer-encoding", "").lower() == "chunked", rh
    return rc, status, rh, ChunkedReader(rc)
