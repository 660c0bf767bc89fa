"""Fixtures that run a real hangard on loopback against the local provider.

meson passes the binaries (HANGARD, HANGAR_ENVD_PATH, HANGAR_JAIL_PATH).
Each server gets a port from the kernel (-port 0), reported on -ready-fd,
a tokens file of its own and, unless it shares one, a state directory.
make_fake starts the e2b fake (FAKE_E2B) of a flavour, for the e2b provider.
"""

import http.client
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time

import pytest

# Tokens of the default tokens file: name -> (token, scopes).
TOKENS = {
    "writer": ("w-" + "7" * 40, "read,write"),
    "reader": ("r-" + "5" * 40, "read"),
    "boss": ("a-" + "3" * 40, "admin"),
}
# The e2b fake's API key (fake-e2b --api-key), which hangard is given.
FAKE_API_KEY = "e2b_test_fedcba9876543210fedcba9876543210"
WRITER = TOKENS["writer"][0]
READER = TOKENS["reader"][0]
ADMIN = TOKENS["boss"][0]


def binary():
    path = os.environ.get("HANGARD")
    if not path:
        pytest.skip("HANGARD is not set (run through meson test)")
    return path


def wait_for(what, cond, timeout=30, interval=0.05):
    """Returns cond()'s first true value, asked until the deadline."""
    end = time.monotonic() + timeout
    while time.monotonic() <= end:
        got = cond()
        if got:
            return got
        time.sleep(interval)
    got = cond()
    if not got:
        pytest.fail(f"{what}: not within {timeout} s")
    return got


def resolve_ref(doc, obj):
    """obj of the OpenAPI document doc with its $ref followed, as often as it has one."""
    while "$ref" in obj:
        node = doc
        for part in obj["$ref"].lstrip("#/").split("/"):
            node = node[part]
        obj = node
    return obj


def hash_line(name, token, scopes):
    r = subprocess.run([binary(), "hash-token", name, scopes], input=token.encode(),
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30)
    assert r.returncode == 0, r.stderr
    return r.stdout.decode()


class Response:
    def __init__(self, status, headers, body):
        self.status = status
        self.headers = headers
        self.body = body

    def json(self):
        return json.loads(self.body)

    def header(self, name):
        return self.headers.get(name.lower())

    def __repr__(self):
        return f"<{self.status} {self.body[:300]!r}>"


class Server:
    """One hangard process."""

    def __init__(self, workdir, state_dir=None, args=(), env=None, tokens_file=None):
        self.workdir = workdir
        self.state_dir = state_dir or os.path.join(workdir, "state")
        if tokens_file is None:
            tokens_file = os.path.join(workdir, "tokens")
            with open(tokens_file, "w") as f:
                f.write("# name scopes hash\n")
                for name, (tok, scopes) in TOKENS.items():
                    f.write(hash_line(name, tok, scopes))
        self.tokens_file = tokens_file
        self.env = {k: v for k, v in os.environ.items() if not k.startswith(("HANGAR_", "HANGARD_"))}
        for name in ("HANGAR_ENVD_PATH", "HANGAR_JAIL_PATH"):
            if os.environ.get(name):
                self.env[name] = os.environ[name]
        self.env["HANGAR_STATE_DIR"] = self.state_dir
        self.env["HANGARD_TMPDIR"] = workdir
        if env:
            self.env.update(env)
        self.log_path = os.path.join(workdir, f"hangard-{time.monotonic_ns()}.log")
        self.args = ["-tokens", tokens_file, "-port", "0", *args]
        self.tls_context = None
        self.preexec = None  # runs in the child before hangard starts (its limits)
        self.proc = None
        self.port = None

    def start(self):
        rfd, wfd = os.pipe()
        self.log = open(self.log_path, "wb")
        self.proc = subprocess.Popen([binary(), *self.args, "-ready-fd", str(wfd)], env=self.env,
                                     stdin=subprocess.DEVNULL, stdout=self.log, stderr=self.log,
                                     pass_fds=(wfd,), preexec_fn=self.preexec)
        os.close(wfd)
        with os.fdopen(rfd) as f:
            line = f.readline()
        if not line.startswith("ready "):
            self.proc.wait(timeout=30)
            pytest.fail(f"hangard did not start: {self.log_text()}")
        self.port = int(line.split()[1])
        return self

    def log_text(self):
        with open(self.log_path, "rb") as f:
            return f.read().decode(errors="replace")

    def log_lines(self):
        return [json.loads(l) for l in self.log_text().splitlines() if l.startswith("{")]

    def connection(self, timeout=120):
        if self.tls_context:
            return http.client.HTTPSConnection("127.0.0.1", self.port, timeout=timeout, context=self.tls_context)
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)

    def request(self, method, path, body=None, token=WRITER, headers=None, timeout=120):
        h = dict(headers or {})
        if token is not None:
            h["Authorization"] = f"Bearer {token}"
        if isinstance(body, (dict, list)):
            body = json.dumps(body).encode()
            h.setdefault("Content-Type", "application/json")
        c = self.connection(timeout)
        try:
            c.request(method, path, body=body, headers=h)
            r = c.getresponse()
            return Response(r.status, {k.lower(): v for k, v in r.getheaders()}, r.read())
        finally:
            c.close()

    def ok(self, method, path, body=None, status=200, **kw):
        r = self.request(method, path, body, **kw)
        assert r.status == status, f"{method} {path}: {r}"
        return r

    def stop(self, sig=signal.SIGTERM, timeout=60):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if getattr(self, "log", None):
            self.log.close()
        return self.proc.returncode if self.proc else None


@pytest.fixture(scope="session")
def workdir():
    with tempfile.TemporaryDirectory(prefix="hangard-test-") as d:
        yield d
        remove_runtime_dirs(d)


@pytest.fixture
def make_server(workdir):
    """Starts extra servers with their own settings; stops them after."""
    started = []

    def make(args=(), env=None, state_dir=None, tokens_file=None):
        d = tempfile.mkdtemp(dir=workdir)
        s = Server(d, state_dir=state_dir, args=args, env=env, tokens_file=tokens_file)
        started.append(s)
        return s

    yield make
    for s in started:
        s.stop()


@pytest.fixture(scope="session")
def server(workdir):
    d = tempfile.mkdtemp(dir=workdir)
    envs = os.path.join(d, "environments.json")
    with open(envs, "w") as f:
        json.dump({"small": {"description": "a small one", "tier": "default", "timeout_sec": 600,
                             "env": {"FROM_ENVIRONMENT": "yes"}}}, f)
    s = Server(d, env={"HANGAR_ENVIRONMENTS_FILE": envs}).start()
    yield s
    r = s.request("GET", "/v1/sandboxes")
    if r.status == 200:
        for sb in r.json()["sandboxes"]:
            s.request("DELETE", f"/v1/sandboxes/{sb['id']}")
    s.stop()


@pytest.fixture(scope="module")
def sandbox(server):
    r = server.ok("POST", "/v1/sandboxes", {}, status=201)
    sid = r.json()["id"]
    yield sid
    server.request("DELETE", f"/v1/sandboxes/{sid}")


class Fake:
    """One fake-e2b process of a flavour, with its test hooks (/_fake/)."""

    def __init__(self, workdir, flavour):
        path, envd = os.environ.get("FAKE_E2B"), os.environ.get("HANGAR_ENVD_PATH")
        if not path or not envd:
            pytest.skip("FAKE_E2B and HANGAR_ENVD_PATH are not set (run through meson test)")
        self.flavour = flavour
        rfd, wfd = os.pipe()
        self.log = open(os.path.join(workdir, f"fake-e2b-{flavour}-{id(self)}.log"), "wb")
        self.proc = subprocess.Popen([path, "--flavour", flavour, "--envd", envd, "--ready-fd", str(wfd),
                                      "--api-key", FAKE_API_KEY], pass_fds=(wfd,), stdin=subprocess.DEVNULL,
                                     stdout=self.log, stderr=self.log)
        os.close(wfd)
        with os.fdopen(rfd) as f:
            line = f.readline().split()
        if len(line) != 3 or line[0] != "ready":
            self.proc.kill()
            self.proc.wait()
            pytest.fail(f"the e2b fake ({flavour}) did not start: {line}")
        self.api, self.edge = int(line[1]), int(line[2])

    def hook(self, method, path, body=None):
        c = http.client.HTTPConnection("127.0.0.1", self.api, timeout=30)
        try:
            c.request(method, path, body=json.dumps(body) if body is not None else None,
                      headers={"Content-Type": "application/json"} if body is not None else {})
            r = c.getresponse()
            return r.status, r.read()
        finally:
            c.close()

    def fault(self, **spec):
        """Queues a fault (fake-e2b.c, "Test hooks"): route, status, retry_after, delay_ms, ..."""
        status, body = self.hook("POST", "/_fake/faults", spec)
        assert status == 204, (status, body)

    def sandboxes(self):
        """The fake's live sandboxes by id."""
        status, body = self.hook("GET", "/_fake/sandboxes")
        assert status == 200, (status, body)
        return {s["id"]: s for s in json.loads(body)}

    def env(self):
        """What hangard needs to reach this fake as its e2b provider."""
        e = {
            "HANGAR_E2B_FLAVOR": self.flavour,
            "HANGAR_E2B_API_URL": f"http://127.0.0.1:{self.api}",
            "HANGAR_E2B_SANDBOX_URL": f"http://127.0.0.1:{self.edge}",
            "HANGAR_E2B_API_KEY": FAKE_API_KEY,
        }
        if self.flavour == "cube":
            # CubeSandbox mints no envd token: its proxy's traffic token guards envd.
            e["HANGAR_E2B_ALLOW_UNAUTHENTICATED_ENVD"] = "true"
        return e

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=60)
        self.log.close()


@pytest.fixture
def make_fake(workdir):
    """make(flavour): a fake of that flavour, stopped after the test."""
    fakes = []

    def make(flavour="cloud"):
        f = Fake(workdir, flavour)
        fakes.append(f)
        return f

    yield make
    for f in fakes:
        f.stop()


def remove_runtime_dirs(top):
    """Removes the runtime directories (on a tmpfs) that the state directories under top link to as local/run."""
    for root, dirs, _ in os.walk(top):
        if os.path.basename(root) == "local" and "run" in dirs and os.path.islink(os.path.join(root, "run")):
            shutil.rmtree(os.readlink(os.path.join(root, "run")), ignore_errors=True)
