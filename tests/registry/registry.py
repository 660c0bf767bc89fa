"""The registry suite's harness: real registries and hostile ones on loopback.

- Registry: Debian's docker-registry (/usr/bin/docker-registry) with a
  config written here, over plain http or TLS with a CA made here (openssl).
- AuthProxy: a front proxy of our own before a Registry that asks for basic
  credentials or for a bearer token from a token endpoint it serves itself,
  as Docker Hub and most registries do (the proxy checks the token).
- Hostile: a registry of our own serving one OCI layout, with faults.
- push(): skopeo copy of an OCI layout into a registry.

Every process and server started is stopped by stop_all(), which also
proves that none of the processes is left.
"""
import base64
import hashlib
import http.client
import http.server
import json
import os
import secrets
import signal
import socket
import ssl
import subprocess
import threading
import time

_procs = []
_servers = []


def wait_until(cond, timeout=20.0, what="condition"):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        v = cond()
        if v:
            return v
        time.sleep(0.02)
    raise TimeoutError(f"timed out waiting for {what}")


def free_port(host="127.0.0.1"):
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def port_open(host, port):
    try:
        with socket.create_connection((host, port), timeout=0.2):
            return True
    except OSError:
        return False


def make_ca(d, names=("127.0.0.1", "localhost", "127.0.0.2")):
    """A CA and a server certificate it signed, for the names given. Returns (ca.pem, cert, key)."""
    os.makedirs(d, exist_ok=True)
    ca_key, ca_pem = f"{d}/ca.key", f"{d}/ca.pem"
    key, csr, crt = f"{d}/server.key", f"{d}/server.csr", f"{d}/server.pem"
    run = lambda *a: subprocess.run(a, check=True, capture_output=True)
    run("openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
        "-keyout", ca_key, "-out", ca_pem, "-days", "2", "-subj", "/CN=hangar registry test CA")
    run("openssl", "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
        "-keyout", key, "-out", csr, "-subj", "/CN=127.0.0.1")
    san = ",".join(("IP:" if n[0].isdigit() else "DNS:") + n for n in names)
    ext = f"{d}/ext.cnf"
    with open(ext, "w") as f:
        f.write(f"subjectAltName={san}\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n")
    run("openssl", "x509", "-req", "-in", csr, "-CA", ca_pem, "-CAkey", ca_key, "-CAcreateserial",
        "-out", crt, "-days", "2", "-extfile", ext)
    return ca_pem, crt, key


class Registry:
    """docker-registry on 127.0.0.1, storage in d; TLS when cert and key are given."""

    def __init__(self, d, cert=None, key=None):
        self.dir = d
        self.port = free_port()
        self.tls = cert is not None
        os.makedirs(d, exist_ok=True)
        cfg = {
            "version": 0.1,
            "log": {"level": "error", "accesslog": {"disabled": True}},
            "storage": {"filesystem": {"rootdirectory": f"{d}/data"}, "delete": {"enabled": True}},
            "http": {"addr": f"127.0.0.1:{self.port}", "secret": secrets.token_hex(16)},
        }
        if cert:
            cfg["http"]["tls"] = {"certificate": cert, "key": key}
        # JSON is YAML.
        with open(f"{d}/config.yml", "w") as f:
            json.dump(cfg, f)
        self.log = open(f"{d}/registry.log", "w")
        self.proc = subprocess.Popen(["/usr/bin/docker-registry", "serve", f"{d}/config.yml"],
                                     stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True)
        _procs.append(self.proc)
        wait_until(lambda: port_open("127.0.0.1", self.port) or self.proc.poll() is not None, 20, "docker-registry")
        if self.proc.poll() is not None:
            raise RuntimeError("docker-registry exited: " + open(f"{d}/registry.log").read())

    @property
    def host(self):
        return f"127.0.0.1:{self.port}"


def push(layout, dest, tag="latest", cert_dir=None, fmt=None):
    """skopeo copy oci:LAYOUT:tag docker://DEST."""
    args = ["skopeo", "copy", "--quiet", "--insecure-policy"]
    if cert_dir:
        args += ["--dest-cert-dir", cert_dir]
    else:
        args += ["--dest-tls-verify=false"]
    if fmt:
        args += ["--format", fmt]
    args += [f"oci:{layout}:{tag}", f"docker://{dest}"]
    subprocess.run(args, check=True, capture_output=True, timeout=300)


def skopeo_inspect_layout(d):
    r = subprocess.run(["skopeo", "inspect", f"oci:{d}"], check=True, capture_output=True, timeout=60)
    return json.loads(r.stdout)


# ---- small servers of our own ----------------------------------------------------------

class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def handle_one_request(self):
        # A TLS hello on a plain port (a client trying https first): close, do not wait for a line.
        if not isinstance(self.connection, ssl.SSLSocket):
            try:
                first = self.connection.recv(1, socket.MSG_PEEK)
            except OSError:
                first = b""
            if first in (b"", b"\x16"):
                self.close_connection = True
                return
        super().handle_one_request()

    def do_GET(self):
        self.server.owner.handle(self)

    do_HEAD = do_GET
    do_POST = do_GET
    do_PUT = do_GET
    do_PATCH = do_GET

    def reply(self, status, body=b"", headers=None, length=True):
        self.send_response(status)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        if length:
            self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD" and body:
            self.wfile.write(body)


class _Base:
    def __init__(self, host="127.0.0.1", tls=None):
        self.srv = _Server((host, 0), _Handler)
        self.srv.owner = self
        if tls:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(tls[0], tls[1])
            self.srv.socket = ctx.wrap_socket(self.srv.socket, server_side=True)
        self.port = self.srv.server_address[1]
        self.hostname = host
        self.seen = []  # (method, path, headers) of every request
        self.lock = threading.Lock()
        t = threading.Thread(target=self.srv.serve_forever, daemon=True)
        t.start()
        _servers.append(self)

    @property
    def host(self):
        return f"{self.hostname}:{self.port}"

    def note(self, h):
        with self.lock:
            self.seen.append((h.command, h.path, dict(h.headers)))

    def handle(self, h):
        self.note(h)
        h.reply(404, b"{}")

    def stop(self):
        self.srv.shutdown()
        self.srv.server_close()


class AuthProxy(_Base):
    """Forwards to upstream (host:port, plain http) what carries the right credentials.

    mode "basic": Authorization: Basic of user:password. mode "bearer": a
    token from GET /token (service "test-registry"), which answers only to
    basic user:password when those are set, else to anyone.
    """

    def __init__(self, upstream, mode, user=None, password=None, tls=None, expire_first=False):
        super().__init__(tls=tls)
        self.upstream, self.mode, self.user, self.password = upstream, mode, user, password
        self.expire_first = expire_first  # the first token expires once it has been used
        self.tokens = set()
        self.scheme = "https" if tls else "http"

    def basic_ok(self, h):
        want = "Basic " + base64.b64encode(f"{self.user}:{self.password}".encode()).decode()
        return h.headers.get("Authorization") == want

    def handle(self, h):
        self.note(h)
        if h.path.startswith("/token"):
            if self.user and not self.basic_ok(h):
                return h.reply(401, b'{"errors":[{"code":"UNAUTHORIZED","message":"bad credentials"}]}',
                               {"WWW-Authenticate": 'Basic realm="token"'})
            tok = secrets.token_hex(16)
            with self.lock:
                self.tokens.add(tok)
            return h.reply(200, json.dumps({"token": tok, "expires_in": 300}).encode(),
                           {"Content-Type": "application/json"})
        auth = h.headers.get("Authorization", "")
        if self.mode == "basic":
            ok = self.basic_ok(h)
            challenge = 'Basic realm="test registry"'
        else:
            with self.lock:
                ok = auth.startswith("Bearer ") and auth[7:] in self.tokens
                if ok and self.expire_first:
                    self.tokens.discard(auth[7:])
                    self.expire_first = False
            name = h.path.split("/")[2] if h.path.count("/") > 2 else ""
            challenge = (f'Bearer realm="{self.scheme}://{self.host}/token",service="test-registry",'
                         f'scope="repository:{name}:pull"')
        if not ok:
            return h.reply(401, b'{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}',
                           {"WWW-Authenticate": challenge, "Content-Type": "application/json"})
        c = http.client.HTTPConnection(*self.upstream.split(":"), timeout=30)
        headers = {k: v for k, v in h.headers.items() if k.lower() in ("accept",)}
        c.request(h.command, h.path, headers=headers)
        r = c.getresponse()
        body = r.read()
        keep = {k: v for k, v in r.getheaders()
                if k.lower() in ("content-type", "docker-content-digest", "location")}
        h.reply(r.status, body, keep)
        c.close()


class Layout:
    """An OCI image layout read into memory: its blobs by digest, its manifest."""

    def __init__(self, d):
        self.blobs = {}
        for name in os.listdir(f"{d}/blobs/sha256"):
            with open(f"{d}/blobs/sha256/{name}", "rb") as f:
                self.blobs["sha256:" + name] = f.read()
        idx = json.load(open(f"{d}/index.json"))
        self.manifest_digest = idx["manifests"][0]["digest"]
        self.manifest = self.blobs[self.manifest_digest]
        self.manifest_json = json.loads(self.manifest)

    def add(self, data):
        d = "sha256:" + hashlib.sha256(data).hexdigest()
        self.blobs[d] = data
        return d


class Hostile(_Base):
    """A registry serving one image (name "img", any tag) whose answers faults may change.

    faults: a function (handler, kind, ref) -> True when it answered itself;
    kind is "manifest" or "blob". Otherwise the layout's own bytes are served.
    """

    def __init__(self, layout, fault=None, host="127.0.0.1", tls=None):
        super().__init__(host=host, tls=tls)
        self.layout = layout
        self.fault = fault

    def handle(self, h):
        self.note(h)
        parts = h.path.split("?")[0].split("/")
        if h.path in ("/v2/", "/v2"):
            return h.reply(200, b"{}")
        if len(parts) != 5 or parts[1] != "v2" or parts[3] not in ("manifests", "blobs"):
            return h.reply(404, b'{"errors":[{"code":"NAME_UNKNOWN","message":"no such thing"}]}')
        kind = "manifest" if parts[3] == "manifests" else "blob"
        ref = parts[4]
        if self.fault and self.fault(h, kind, ref):
            return
        if kind == "manifest":
            if ref.startswith("sha256:"):
                data = self.layout.blobs.get(ref)
            else:
                data = self.layout.manifest
            if data is None:
                return h.reply(404, b'{"errors":[{"code":"MANIFEST_UNKNOWN","message":"unknown"}]}')
            mt = json.loads(data).get("mediaType", "application/vnd.oci.image.manifest.v1+json")
            return h.reply(200, data, {"Content-Type": mt})
        data = self.layout.blobs.get(ref)
        if data is None:
            return h.reply(404, b'{"errors":[{"code":"BLOB_UNKNOWN","message":"unknown"}]}')
        h.reply(200, data, {"Content-Type": "application/octet-stream"})


class Silent:
    """A listening socket that never accepts: connections are made (the kernel's backlog) and never answered."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        _servers.append(self)

    @property
    def host(self):
        return f"127.0.0.1:{self.port}"

    def stop(self):
        self.sock.close()


def stop_all():
    """Stops every server and process; raises if a process survived."""
    for s in _servers:
        try:
            s.stop()
        except Exception:
            pass
    _servers.clear()
    left = []
    for p in _procs:
        if p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            left.append(p.pid)
        if os.path.exists(f"/proc/{p.pid}") and open(f"/proc/{p.pid}/stat").read().split()[2] != "Z":
            left.append(p.pid)
    _procs.clear()
    if left:
        raise RuntimeError(f"processes left running: {left}")
