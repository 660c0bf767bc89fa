#!/usr/bin/env python3
"""Smoke tests of fake-e2b's flavours and quirks (standard library only).

Environment: FAKE_E2B (the fake binary) and HANGAR_ENVD (the daemon every fake
sandbox runs). Every wait has a deadline: pipes and sockets with timeouts,
pidfds for process exits; nothing sleeps.
"""
import base64
import http.client
import json
import os
import select
import signal
import socket
import struct
import subprocess
import tempfile
import threading
import time
import unittest
import urllib.parse

from fakee2b import FakeE2B

FAKE = os.environ.get("FAKE_E2B")
ENVD = os.environ.get("HANGAR_ENVD")
ENVD_PORT = 49983


class Fake(FakeE2B):
    """One fake-e2b process on kernel-chosen ports, with a state directory of its own."""

    def __init__(self, flavour, api_key=None, extra=()):
        self.state_dir = tempfile.TemporaryDirectory(prefix="fake-e2b-")
        super().__init__(flavour, api_key=api_key, extra=("--state-dir", self.state_dir.name, *extra),
                         deadline=10)

    def close(self):
        self.proc.send_signal(signal.SIGTERM)
        code = self.proc.wait(timeout=30)
        self.state_dir.cleanup()
        # nonzero: a sanitizer report, or a shutdown that went wrong
        assert code == 0, f"fake-e2b exited with {code}"

    def request(self, method, path, body=None, headers=None, raw=None, auth=True, timeout=30):
        conn = http.client.HTTPConnection("127.0.0.1", self.api_port, timeout=timeout)
        h = dict(headers or {})
        if auth and self.api_key and "X-API-Key" not in h:
            h["X-API-Key"] = self.api_key
        data = raw
        if body is not None:
            data = json.dumps(body).encode()
            h.setdefault("Content-Type", "application/json")
        conn.request(method, path, body=data, headers=h)
        resp = conn.getresponse()
        payload = resp.read()
        conn.close()
        return resp, payload

    def json(self, method, path, body=None, **kw):
        resp, payload = self.request(method, path, body, **kw)
        return resp.status, (json.loads(payload) if payload else None), resp

    def sandboxes(self):
        return {s["id"]: s for s in self.json("GET", "/_fake/sandboxes", auth=False)[1]}

    def fault(self, **spec):
        status, _, _ = self.json("POST", "/_fake/faults", spec, auth=False)
        assert status == 204

    def edge(self, method, path, sandbox_id, body=b"", headers=None, port=ENVD_PORT, host=None):
        conn = http.client.HTTPConnection("127.0.0.1", self.edge_port, timeout=30)
        h = {"Content-Type": "application/json"}
        if host:
            h["Host"] = host
        else:
            h["E2b-Sandbox-Id"] = sandbox_id
            h["E2b-Sandbox-Port"] = str(port)
        h.update(headers or {})
        conn.request(method, path, body=body, headers=h)
        resp = conn.getresponse()
        payload = resp.read()
        conn.close()
        return resp.status, payload


def closed_port():
    """A loopback port nothing listens on (the kernel's pick, released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PortServer:
    """A loopback server answering one fixed HTTP answer per connection, with the request it got."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(4)
        self.port = self.sock.getsockname()[1]
        self.requests = []
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            with c:
                data = b""
                while b"\r\n\r\n" not in data:
                    chunk = c.recv(65536)
                    if not chunk:
                        break
                    data += chunk
                self.requests.append(data.decode("latin-1"))
                c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 7\r\nConnection: close\r\n\r\nport-ok")

    def close(self):
        self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()
        self.thread.join(10)


def wait_pid_exit(pid, seconds):
    """True once pid has exited (pidfd readable), False at the deadline."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        ready, _, _ = select.select([fd], [], [], seconds)
        return bool(ready)
    finally:
        os.close(fd)


def envelope(obj):
    data = json.dumps(obj).encode()
    return struct.pack(">BI", 0, len(data)) + data


class Stream:
    """process.Process/Start through the edge, read off a raw socket.

    Every read waits in select() with a deadline, so "nothing arrived in time"
    is an answer rather than an exception that spoils the connection.
    """

    def __init__(self, fake, sandbox_id, cmd, headers):
        body = envelope({"process": {"cmd": "/bin/sh", "args": ["-c", cmd]}})
        h = {"Host": "127.0.0.1", "Content-Type": "application/connect+json",
             "Connect-Protocol-Version": "1", "E2b-Sandbox-Id": sandbox_id,
             "E2b-Sandbox-Port": str(ENVD_PORT), "Content-Length": str(len(body))}
        h.update(headers)
        head = "POST /process.Process/Start HTTP/1.1\r\n" + "".join(
            f"{k}: {v}\r\n" for k, v in h.items()) + "\r\n"
        self.sock = socket.create_connection(("127.0.0.1", fake.edge_port), timeout=30)
        self.sock.sendall(head.encode() + body)
        self.raw = b""
        while b"\r\n\r\n" not in self.raw:
            if not self._recv(10):
                raise RuntimeError("no response head")
        head, self.raw = self.raw.split(b"\r\n\r\n", 1)
        assert head.split()[1] == b"200", head
        self.chunked = b"transfer-encoding: chunked" in head.lower()
        self.buf = b""

    def _recv(self, timeout):
        ready, _, _ = select.select([self.sock], [], [], timeout)
        if not ready:
            return False
        data = self.sock.recv(65536)
        if not data:
            raise EOFError
        self.raw += data
        return True

    def _dechunk(self):
        if not self.chunked:
            self.buf += self.raw
            self.raw = b""
            return
        while b"\r\n" in self.raw:
            size_line, rest = self.raw.split(b"\r\n", 1)
            size = int(size_line.split(b";")[0], 16)
            if len(rest) < size + 2:
                return
            self.buf += rest[:size]
            self.raw = rest[size + 2:]

    def message(self, timeout):
        """The next message, or None when nothing arrives before the timeout."""
        while True:
            self._dechunk()
            if len(self.buf) >= 5:
                _, size = struct.unpack(">BI", self.buf[:5])
                if len(self.buf) >= 5 + size:
                    msg = json.loads(self.buf[5:5 + size])
                    self.buf = self.buf[5 + size:]
                    return msg
            if not self._recv(timeout):
                return None

    def stdout(self, timeout):
        """The next stdout chunk before the deadline, else None."""
        while True:
            msg = self.message(timeout)
            if msg is None:
                return None
            data = msg.get("event", {}).get("data", {}).get("stdout")
            if data:
                return base64.b64decode(data)

    def close(self):
        self.sock.close()


@unittest.skipUnless(FAKE and ENVD, "FAKE_E2B and HANGAR_ENVD must be set")
class CloudTests(unittest.TestCase):
    flavour = "cloud"

    @classmethod
    def setUpClass(cls):
        cls.fake = Fake(cls.flavour, api_key="e2b_test")

    @classmethod
    def tearDownClass(cls):
        cls.fake.close()

    def create(self, **body):
        body.setdefault("templateID", "base")
        body.setdefault("secure", True)
        body.setdefault("timeout", 120)
        status, sb, _ = self.fake.json("POST", "/v2/sandboxes", body)
        self.assertEqual(status, 201, sb)
        return sb

    def test_auth(self):
        status, err, _ = self.fake.json("GET", "/v2/sandboxes", auth=False)
        self.assertEqual((status, err["code"]), (401, 401))
        status, err, _ = self.fake.json("GET", "/v2/sandboxes", headers={"x-api-key": "nope"})
        self.assertEqual((status, err["code"]), (401, 401))
        resp, _ = self.fake.request("GET", "/health", auth=False)
        self.assertEqual(resp.status, 204)

    def test_create_validation(self):
        status, err, _ = self.fake.json("POST", "/v2/sandboxes", {"timeout": 5})
        self.assertEqual((status, err["code"]), (400, 400))
        status, err, _ = self.fake.json("POST", "/v2/sandboxes", {"templateID": "no-such"})
        self.assertEqual(status, 400)
        sb = self.create()
        self.assertEqual(len(sb["sandboxID"]), 20)
        self.assertRegex(sb["sandboxID"], r"^[a-z0-9]{20}$")
        self.assertRegex(sb["envdAccessToken"], r"^[0-9a-f]{64}$")
        self.assertIsNone(sb["trafficAccessToken"])
        self.assertEqual(sb["envdVersion"], "0.6.4")
        status, detail, _ = self.fake.json("GET", f"/sandboxes/{sb['sandboxID']}")
        self.assertEqual((status, detail["state"]), (200, "running"))
        self.assertEqual(self.fake.json("DELETE", f"/sandboxes/{sb['sandboxID']}")[0], 204)
        self.assertEqual(self.fake.json("DELETE", f"/sandboxes/{sb['sandboxID']}")[0], 404)

    def test_pagination_headers(self):
        ids = {self.create(metadata={"suite": "pages"})["sandboxID"] for _ in range(3)}
        meta = urllib.parse.quote("suite=pages")
        status, page1, resp = self.fake.json("GET", f"/v2/sandboxes?metadata={meta}&limit=2")
        self.assertEqual((status, len(page1)), (200, 2))
        token = resp.getheader("X-Next-Token")
        self.assertTrue(token)
        self.assertEqual(resp.getheader("X-Total-Running"), "3")
        status, page2, resp = self.fake.json(
            "GET", f"/v2/sandboxes?metadata={meta}&limit=2&nextToken={urllib.parse.quote(token)}")
        self.assertEqual((status, len(page2)), (200, 1))
        self.assertIsNone(resp.getheader("X-Next-Token"))
        self.assertEqual({s["sandboxID"] for s in page1 + page2}, ids)
        self.assertEqual(self.fake.json("GET", "/v2/sandboxes?limit=0")[0], 400)
        status, paused, resp = self.fake.json("GET", f"/v2/sandboxes?metadata={meta}&state=paused")
        self.assertEqual((status, paused), (200, []))
        self.assertIsNone(resp.getheader("X-Total-Running"))
        for i in ids:
            self.fake.json("DELETE", f"/sandboxes/{i}")

    def test_pause_twice_and_token_rotation(self):
        sb = self.create()
        sid, old = sb["sandboxID"], sb["envdAccessToken"]
        tok = {"X-Access-Token": old}
        self.assertEqual(self.fake.edge("POST", "/process.Process/List", sid, b"{}", tok)[0], 200)
        # host-label routing too
        self.assertEqual(self.fake.edge("POST", "/process.Process/List", sid, b"{}", tok,
                                        host=f"{ENVD_PORT}-{sid}.e2b.test")[0], 200)
        self.assertEqual(self.fake.edge("POST", "/process.Process/List", sid, b"{}")[0], 401)
        self.assertEqual(self.fake.edge("GET", "/health", sid)[0], 204)
        self.assertEqual(self.fake.json("POST", f"/sandboxes/{sid}/pause", {})[0], 204)
        status, err, _ = self.fake.json("POST", f"/sandboxes/{sid}/pause", {})
        self.assertEqual((status, err["code"]), (409, 409))
        self.assertEqual(self.fake.edge("POST", "/process.Process/List", sid, b"{}", tok)[0], 502)
        status, detail, _ = self.fake.json("GET", f"/sandboxes/{sid}")
        self.assertEqual(detail["state"], "paused")
        status, resumed, _ = self.fake.json("POST", f"/v2/sandboxes/{sid}/connect", {"timeout": 60})
        self.assertEqual(status, 201)
        new = resumed["envdAccessToken"]
        self.assertNotEqual(new, old)
        self.assertEqual(self.fake.edge("POST", "/process.Process/List", sid, b"{}", tok)[0], 401)
        self.assertEqual(self.fake.edge("POST", "/process.Process/List", sid, b"{}",
                                        {"X-Access-Token": new})[0], 200)
        status, again, _ = self.fake.json("POST", f"/sandboxes/{sid}/connect", {"timeout": 60})
        self.assertEqual((status, again["envdAccessToken"]), (200, new))
        self.fake.json("DELETE", f"/sandboxes/{sid}")

    def test_connect_extends_and_timeout_shortens(self):
        sid = self.create(timeout=600)["sandboxID"]
        before = self.fake.sandboxes()[sid]["expires_at"]
        self.assertEqual(self.fake.json("POST", f"/v2/sandboxes/{sid}/connect", {"timeout": 10})[0], 200)
        self.assertGreaterEqual(self.fake.sandboxes()[sid]["expires_at"], before - 0.01)
        self.assertEqual(self.fake.json("POST", f"/sandboxes/{sid}/timeout", {"timeout": 30})[0], 204)
        self.assertLess(self.fake.sandboxes()[sid]["expires_at"], before - 500)
        self.assertEqual(self.fake.json("POST", f"/sandboxes/{sid}/refreshes", {"duration": 5})[0], 204)
        self.assertEqual(self.fake.json("POST", f"/sandboxes/{sid}/connect", {})[0], 400)
        self.fake.json("DELETE", f"/sandboxes/{sid}")

    def test_faults(self):
        self.fake.fault(route="create", status=429, retry_after=3)
        status, err, resp = self.fake.json("POST", "/v2/sandboxes", {"templateID": "base"})
        self.assertEqual((status, err["code"], resp.getheader("Retry-After")), (429, 429, "3"))
        self.fake.fault(route="list", drop=True)
        with self.assertRaises((http.client.RemoteDisconnected, ConnectionError)):
            self.fake.request("GET", "/v2/sandboxes")
        self.fake.fault(route="any", status=503, count=2)
        self.assertEqual(self.fake.json("GET", "/v2/sandboxes")[0], 503)
        self.assertEqual(self.fake.json("GET", "/v2/sandboxes")[0], 503)
        self.assertEqual(self.fake.json("GET", "/v2/sandboxes")[0], 200)
        self.fake.fault(route="get", status=502)
        self.assertEqual(self.fake.request("DELETE", "/_fake/faults", auth=False)[0].status, 204)
        self.assertEqual(self.fake.json("GET", "/sandboxes/nope")[0], 404)

    def test_fault_after(self):
        # The create acts, then the connection closes unanswered: the sandbox exists.
        before = set(self.fake.sandboxes())
        self.fake.fault(route="create", drop=True, after=True)
        with self.assertRaises((http.client.RemoteDisconnected, ConnectionError)):
            self.fake.request("POST", "/v2/sandboxes", {"templateID": "base", "secure": True,
                                                        "metadata": {"tag": "after"}})
        made = set(self.fake.sandboxes()) - before
        self.assertEqual(len(made), 1)
        # The DELETE answers 503 with Retry-After, and does nothing.
        sid = made.pop()
        self.fake.fault(route="kill", status=503, retry_after=2)
        status, _, resp = self.fake.json("DELETE", f"/sandboxes/{sid}")
        self.assertEqual((status, resp.getheader("Retry-After")), (503, "2"))
        self.assertIn(sid, self.fake.sandboxes())
        # As if there were no such route: not JSON, and nothing done.
        self.fake.fault(route="kill", no_route=True)
        resp, payload = self.fake.request("DELETE", f"/sandboxes/{sid}")
        self.assertEqual(resp.status, 404)
        with self.assertRaises(ValueError):
            json.loads(payload or b"")
        self.assertIn(sid, self.fake.sandboxes())
        self.assertEqual(self.fake.json("DELETE", f"/sandboxes/{sid}")[0], 204)

    def broken_stream(self, mode):
        sb = self.create()
        sid = sb["sandboxID"]
        self.fake.fault(route="exec", envd=mode)
        st = Stream(self.fake, sid, "echo real", {"X-Access-Token": sb["envdAccessToken"]})
        msgs = []
        while True:
            m = st.message(10)
            if m is None:
                break
            msgs.append(m)
            if not m.get("event"):
                break
        st.close()
        self.fake.json("DELETE", f"/sandboxes/{sid}")
        return [next(iter(m["event"])) if m.get("event") else "close" for m in msgs], msgs

    def test_envd_fault_two_ends(self):
        kinds, msgs = self.broken_stream("two_ends")
        self.assertEqual(kinds, ["start", "data", "end", "end", "close"])
        self.assertEqual([m["event"]["end"]["exitCode"] for m in msgs if "end" in m.get("event", {})], [0, 7])

    def test_envd_fault_data_after_end(self):
        kinds, _ = self.broken_stream("data_after_end")
        self.assertEqual(kinds, ["start", "end", "data", "close"])

    def test_envd_fault_undecodable(self):
        kinds, msgs = self.broken_stream("undecodable")
        self.assertEqual(kinds, ["start", "data", "end", "close"])
        with self.assertRaises(ValueError):
            base64.b64decode(msgs[1]["event"]["data"]["stdout"], validate=True)

    def test_envd_fault_endless_file(self):
        sb = self.create()
        sid = sb["sandboxID"]
        self.fake.fault(route="files", envd="endless_file")
        conn = http.client.HTTPConnection("127.0.0.1", self.fake.edge_port, timeout=30)
        conn.request("GET", "/files?path=/etc/hostname", headers={
            "E2b-Sandbox-Id": sid, "E2b-Sandbox-Port": str(ENVD_PORT),
            "X-Access-Token": sb["envdAccessToken"]})
        resp = conn.getresponse()
        self.assertEqual((resp.status, resp.getheader("Content-Length")), (200, "68719476736"))
        got = 0
        while got < (4 << 20):
            chunk = resp.read(65536)
            self.assertTrue(chunk)
            got += len(chunk)
        conn.close()
        # The next request is envd's own again.
        status, _ = self.fake.edge("GET", "/health", sid)
        self.assertEqual(status, 204)
        self.fake.json("DELETE", f"/sandboxes/{sid}")

    def test_ttl_expiry_kills_envd(self):
        sid = self.create(timeout=1)["sandboxID"]
        pid = self.fake.sandboxes()[sid]["envd_pid"]
        self.assertTrue(wait_pid_exit(pid, 15), "envd outlived its sandbox's TTL")
        # The record goes right after the processes; wait for it with a deadline.
        deadline = time.monotonic() + 10
        while self.fake.json("GET", f"/sandboxes/{sid}")[0] != 404:
            self.assertLess(time.monotonic(), deadline, "the expired sandbox is still listed")
            time.sleep(0.02)  # polling a condition, bounded by the deadline above

    def assert_ticks(self, data):
        self.assertIsNotNone(data, "no output")
        self.assertTrue(data.endswith(b"\n") and set(data.split(b"\n")[:-1]) == {b"tick"}, data)

    def test_pause_stops_processes_and_resume_continues(self):
        sb = self.create()
        sid = sb["sandboxID"]
        stream = Stream(self.fake, sid, "while :; do echo tick; sleep 0.05; done",
                        {"X-Access-Token": sb["envdAccessToken"]})
        try:
            # Output may arrive in one piece or several on a loaded machine: only ticks, at least one.
            self.assert_ticks(stream.stdout(10))
            self.assertEqual(self.fake.json("POST", f"/sandboxes/{sid}/pause", {})[0], 204)
            while stream.stdout(0.5) is not None:  # what was in flight
                pass
            self.assertIsNone(stream.stdout(1.0), "a paused sandbox kept printing")
            status, resumed, _ = self.fake.json("POST", f"/v2/sandboxes/{sid}/connect", {"timeout": 60})
            self.assertEqual(status, 201)
            self.assert_ticks(stream.stdout(10))
        finally:
            stream.close()
            self.fake.json("DELETE", f"/sandboxes/{sid}")

    def test_traffic_token(self):
        sb = self.create(network={"allowPublicTraffic": False})
        sid = sb["sandboxID"]
        self.assertRegex(sb["trafficAccessToken"], r"^[0-9a-f]+$")
        tok = {"X-Access-Token": sb["envdAccessToken"]}
        # E2B exempts envd's port from the traffic token
        self.assertEqual(self.fake.edge("POST", "/process.Process/List", sid, b"{}", tok)[0], 200)
        traffic = {"e2b-traffic-access-token": sb["trafficAccessToken"]}
        server = PortServer()
        try:
            self.assertEqual(self.fake.edge("GET", "/", sid, port=server.port)[0], 403)
            self.assertEqual(self.fake.edge("GET", "/x", sid, port=server.port, headers=traffic),
                             (200, b"port-ok"))
            self.assertEqual(len(server.requests), 1)
            self.assertTrue(server.requests[0].startswith("GET /x HTTP/1.1\r\n"), server.requests[0])
        finally:
            server.close()
        status, body = self.fake.edge("GET", "/", sid, port=closed_port(), headers=traffic)
        self.assertEqual(status, 502)
        self.assertIn(b"port is not open", body)
        self.assertEqual(self.fake.edge("GET", "/health", "nosuchsandbox")[0], 502)
        self.fake.json("DELETE", f"/sandboxes/{sid}")

    def test_snapshot_and_templates(self):
        sid = self.create()["sandboxID"]
        status, snap, _ = self.fake.json("POST", f"/sandboxes/{sid}/snapshots", {"name": "snappy"})
        self.assertEqual(status, 201)
        status, listed, _ = self.fake.json("GET", f"/snapshots?sandboxID={sid}")
        self.assertEqual([s["snapshotID"] for s in listed], [snap["snapshotID"]])
        clone = self.create(templateID=snap["snapshotID"])
        self.assertNotEqual(clone["sandboxID"], sid)
        status, tpl, _ = self.fake.json("POST", "/v3/templates", {"name": "hangar-x:abc"})
        self.assertEqual((status, tpl["names"], tpl["tags"]), (202, ["hangar-x"], ["abc"]))
        path = f"/templates/{tpl['templateID']}/builds/{tpl['buildID']}/status"
        self.assertEqual(self.fake.json("GET", path)[1]["status"], "waiting")
        self.assertEqual(self.fake.json(
            "POST", f"/v2/templates/{tpl['templateID']}/builds/{tpl['buildID']}", {"fromImage": "x"})[0], 202)
        seen = [self.fake.json("GET", path)[1]["status"] for _ in range(3)]
        self.assertEqual(seen, ["building", "ready", "ready"])
        status, alias, _ = self.fake.json("GET", "/templates/aliases/hangar-x")
        self.assertEqual((status, alias["templateID"]), (200, tpl["templateID"]))
        self.create(templateID="hangar-x:abc")
        for s in (sid, clone["sandboxID"]):
            self.fake.json("DELETE", f"/sandboxes/{s}")

    def test_page_size_and_repeated_token(self):
        fake = Fake(self.flavour, api_key=self.fake.api_key, extra=("--page-size", "2"))
        try:
            ids = set()
            for _ in range(3):
                status, sb, _ = fake.json("POST", "/v2/sandboxes", {"templateID": "base"})
                ids.add(sb["sandboxID"])
            status, page1, resp = fake.json("GET", "/v2/sandboxes?limit=100")
            self.assertEqual((status, len(page1)), (200, 2))
            token = resp.getheader("X-Next-Token")
            status, page2, resp = fake.json("GET", f"/v2/sandboxes?limit=100&nextToken={token}")
            self.assertEqual((status, len(page2)), (200, 1))
            self.assertIsNone(resp.getheader("X-Next-Token"))
            self.assertEqual({s["sandboxID"] for s in page1 + page2}, ids)
            fake.fault(route="list", repeat_token=True, count=2)
            resp, _ = fake.request("GET", "/v2/sandboxes?limit=100")
            self.assertEqual(resp.getheader("X-Next-Token"), "fake.0")
            resp, _ = fake.request("GET", "/v2/sandboxes?limit=100&nextToken=fake.2")
            self.assertEqual(resp.getheader("X-Next-Token"), "fake.2")
            for sid in ids:
                fake.json("DELETE", f"/sandboxes/{sid}")
        finally:
            fake.close()

    def test_fork(self):
        sid = self.create()["sandboxID"]
        self.fake.fault(route="fork", fork_errors=1)
        status, forks, _ = self.fake.json("POST", f"/sandboxes/{sid}/fork", {"count": 2, "timeout": 60})
        self.assertEqual((status, len(forks)), (201, 2))
        self.assertEqual(forks[0]["error"]["code"], 500)
        self.fake.json("DELETE", f"/sandboxes/{forks[1]['sandbox']['sandboxID']}")
        self.fake.json("DELETE", f"/sandboxes/{sid}")


class SelfhostedTests(CloudTests):
    flavour = "selfhosted"

    def test_fork(self):
        sid = self.create()["sandboxID"]
        resp, payload = self.fake.request("POST", f"/sandboxes/{sid}/fork", {"count": 1})
        self.assertEqual((resp.status, payload), (404, b"404 page not found"))
        self.fake.json("DELETE", f"/sandboxes/{sid}")


@unittest.skipUnless(FAKE and ENVD, "FAKE_E2B and HANGAR_ENVD must be set")
class CubeTests(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.fake = Fake("cube")

    @classmethod
    def tearDownClass(cls):
        cls.fake.close()

    def create(self, **body):
        body.setdefault("templateID", "base")
        status, sb, _ = self.fake.json("POST", "/sandboxes", body)
        self.assertEqual(status, 201, sb)
        return sb

    def test_v2_routes_missing(self):
        resp, payload = self.fake.request("POST", "/v2/sandboxes", {"templateID": "base"})
        self.assertEqual((resp.status, payload), (405, b""))
        self.assertEqual(resp.getheader("Allow"), "GET,HEAD")
        resp, payload = self.fake.request("POST", "/v2/sandboxes/abc/connect", {"timeout": 1})
        self.assertEqual((resp.status, payload), (404, b""))
        resp, payload = self.fake.request("GET", "/v3/templates")
        self.assertEqual((resp.status, payload), (404, b""))
        status, health, _ = self.fake.json("GET", "/health")
        self.assertEqual((status, health["status"]), (200, "ok"))

    def test_public_fault(self):
        self.fake.fault(route="create", public=True)
        sb = self.create(network={"allowPublicTraffic": False})
        self.assertNotIn("trafficAccessToken", sb)
        self.assertTrue(self.fake.sandboxes()[sb["sandboxID"]]["public"])
        self.fake.json("DELETE", f"/sandboxes/{sb['sandboxID']}")

    def test_framework_errors_are_plain_text(self):
        resp, payload = self.fake.request("POST", "/sandboxes", raw=b'{"templateID":"base"}')
        self.assertEqual(resp.status, 415)
        self.assertTrue(resp.getheader("Content-Type").startswith("text/plain"))
        resp, payload = self.fake.request("POST", "/sandboxes", raw=b"{nope",
                                          headers={"Content-Type": "application/json"})
        self.assertEqual(resp.status, 400)
        self.assertTrue(resp.getheader("Content-Type").startswith("text/plain"))
        resp, payload = self.fake.request("POST", "/sandboxes", {"timeout": 1})
        self.assertEqual(resp.status, 422)
        self.assertIn(b"templateID", payload)
        status, err, _ = self.fake.json("POST", "/sandboxes", {"templateID": "tpl-missing"})
        self.assertEqual((status, err["code"]), (500, 500))
        status, err, _ = self.fake.json("POST", "/sandboxes", {"templateID": "base", "envVars": {"LD_PRELOAD": "x"}})
        self.assertEqual(status, 400)

    def test_tokens_connect_and_pause(self):
        sb = self.create(network={"allowPublicTraffic": False})
        sid, traffic = sb["sandboxID"], sb["trafficAccessToken"]
        self.assertNotIn("envdAccessToken", sb)
        self.assertEqual(sb["domain"], "cube.app")
        status, detail, _ = self.fake.json("GET", f"/sandboxes/{sid}")
        self.assertNotIn("trafficAccessToken", detail)
        self.assertNotIn("endAt", detail)  # never times out
        # the traffic token is enforced on envd's port too
        status, body = self.fake.edge("POST", "/process.Process/List", sid, b"{}")
        self.assertEqual((status, json.loads(body)), (403, {"error": "forbidden"}))
        self.assertEqual(self.fake.edge("POST", "/process.Process/List", sid, b"{}",
                                        {"e2b-traffic-access-token": traffic})[0], 200)
        self.assertEqual(self.fake.edge("POST", "/process.Process/List", sid, b"{}",
                                        {"cube-traffic-access-token": traffic},
                                        host=f"{ENVD_PORT}-{sid}.cube.app")[0], 200)
        status, conn, _ = self.fake.json("POST", f"/sandboxes/{sid}/connect", {})
        self.assertEqual(status, 200)
        self.assertNotIn("trafficAccessToken", conn)
        self.assertNotIn("envdAccessToken", conn)
        resp, payload = self.fake.request("POST", f"/sandboxes/{sid}/pause", {"memory": False})
        self.assertEqual(resp.status, 400)
        self.assertEqual(self.fake.request("POST", f"/sandboxes/{sid}/pause")[0].status, 204)
        self.assertEqual(self.fake.json("POST", f"/sandboxes/{sid}/pause")[0], 409)
        self.assertEqual(self.fake.request("POST", f"/sandboxes/{sid}/connect")[0].status, 415)
        status, conn, _ = self.fake.json("POST", f"/sandboxes/{sid}/connect", {"timeout": 30})
        self.assertEqual(status, 200)
        self.assertEqual(self.fake.edge("POST", "/process.Process/List", sid, b"{}",
                                        {"e2b-traffic-access-token": traffic})[0], 200)
        self.assertEqual(self.fake.edge("GET", "/", sid, port=closed_port(),
                                        headers={"e2b-traffic-access-token": traffic})[0], 404)
        server = PortServer()
        try:
            self.assertEqual(self.fake.edge("GET", "/", sid, port=server.port)[0], 403)
            self.assertEqual(self.fake.edge("GET", "/", sid, port=server.port,
                                            headers={"cube-traffic-access-token": traffic},
                                            host=f"{server.port}-{sid}.cube.app"), (200, b"port-ok"))
        finally:
            server.close()
        self.assertEqual(self.fake.json("DELETE", f"/sandboxes/{sid}")[0], 204)
        self.assertEqual(self.fake.edge("GET", "/health", sid)[0], 404)

    def test_lists(self):
        sid = self.create(metadata={"suite": "cube-list"})["sandboxID"]
        meta = urllib.parse.quote("suite=cube-list")
        status, items, resp = self.fake.json("GET", f"/v2/sandboxes?metadata={meta}&limit=1&nextToken=x")
        self.assertEqual((status, len(items)), (200, 1))
        self.assertIsNone(resp.getheader("X-Next-Token"))
        self.assertEqual(items[0]["diskSizeMB"], 0)
        status, items, _ = self.fake.json("GET", f"/v2/sandboxes?metadata={meta}&state=running,paused")
        self.assertEqual(len(items), 1)  # not a literal: no filter
        self.fake.json("DELETE", f"/sandboxes/{sid}")

    def test_template_build(self):
        status, job, _ = self.fake.json("POST", "/templates", {
            "image": "registry.test/hangar-env:1", "name": "hangar-env-0123456789abcdef",
            "cpu": 2000, "memory": 2048, "exposedPorts": [ENVD_PORT], "probePort": ENVD_PORT,
            "probePath": "/health", "writableLayerSize": "1G"})
        self.assertEqual(status, 202)
        self.assertTrue(job["templateID"].startswith("tpl-"))
        path = f"/templates/{job['templateID']}/builds/{job['jobID']}/status"
        seen = [self.fake.json("GET", path)[1]["status"] for _ in range(3)]
        self.assertEqual(seen, ["building", "ready", "ready"])
        status, alias, _ = self.fake.json("GET", "/templates/aliases/hangar-env-0123456789abcdef")
        self.assertEqual((status, alias["templateID"]), (200, job["templateID"]))
        self.assertEqual(self.fake.json("GET", "/templates/aliases/tpl-x")[0], 400)
        self.assertEqual(self.fake.request("POST", "/templates", {"name": "x"})[0].status, 422)
        sid = self.create(templateID=job["templateID"])["sandboxID"]
        status, snap, _ = self.fake.json("POST", f"/sandboxes/{sid}/snapshots", {})
        self.assertRegex(snap["snapshotID"], r"^snap-[0-9a-f]{24}$")
        status, rb, _ = self.fake.json("POST", f"/sandboxes/{sid}/rollback", {"snapshotID": snap["snapshotID"]})
        self.assertEqual((status, rb["status"]), (200, "READY"))
        self.fake.json("DELETE", f"/sandboxes/{sid}")


@unittest.skipUnless(FAKE and ENVD, "FAKE_E2B and HANGAR_ENVD must be set")
class CubeAuthTests(unittest.TestCase):
    def test_auth(self):
        fake = Fake("cube", api_key="cube-key")
        try:
            status, err, _ = fake.json("GET", "/sandboxes", auth=False)
            self.assertEqual(status, 401)
            self.assertTrue(err["message"].startswith("Missing authentication"))
            status, _, _ = fake.json("GET", "/sandboxes", auth=False,
                                     headers={"Authorization": "Bearer cube-key"})
            self.assertEqual(status, 200)
            status, err, _ = fake.json("GET", "/sandboxes", auth=False, headers={"X-API-Key": "bad"})
            self.assertEqual((status, err["message"]), (401, "Invalid API key or token"))
            resp, payload = fake.request("GET", "/nope", auth=False)
            self.assertEqual((resp.status, payload), (404, b""))
            resp, payload = fake.request("POST", "/v2/sandboxes", {}, auth=False)
            self.assertEqual(resp.status, 401)  # auth runs before the 405
            self.assertEqual(fake.request("GET", "/health", auth=False)[0].status, 200)
        finally:
            fake.close()


if __name__ == "__main__":
    unittest.main(verbosity=2)
