"""hangar image pull (hangar_image_pull): a registry's image into the store, end to end.

Through a pass-through proxy of the test's own in front of Debian's
docker-registry, which counts every request and can hold blob answers
until the test lets them go: so a pull can be caught half-way, on purpose.
"""

import glob
import http.client
import json
import os
import signal
import subprocess
import threading

import pytest

import registry
from fakee2b import FakeE2B, FakeE2BMissing
from test_registry import plain, raw_manifest, sha  # noqa: F401  (plain is a fixture)

CLI = os.environ.get("HANGAR_CLI")


class Holding(registry._Base):
    """Forwards everything to upstream; holds blob GETs while self.held is set."""

    def __init__(self, upstream):
        super().__init__()
        self.upstream = upstream
        self.go = threading.Event()
        self.go.set()
        self.waiting = 0

    def handle(self, h):
        self.note(h)
        if "/blobs/" in h.path and h.command == "GET" and not self.go.is_set():
            with self.lock:
                self.waiting += 1
            self.go.wait(120)
        c = http.client.HTTPConnection(*self.upstream.split(":"), timeout=30)
        c.request(h.command, h.path, headers={k: v for k, v in h.headers.items() if k.lower() == "accept"})
        r = c.getresponse()
        body = r.read()
        keep = {k: v for k, v in r.getheaders() if k.lower() in ("content-type", "docker-content-digest")}
        h.reply(r.status, body, keep)
        c.close()

    def blob_gets(self):
        with self.lock:
            return sorted(p for m, p, _ in self.seen if m == "GET" and "/blobs/" in p)


@pytest.fixture
def store(tmp_path):
    if not CLI:
        pytest.skip("HANGAR_CLI is not set")
    env = {k: v for k, v in os.environ.items() if not k.startswith("HANGAR_") and k != "DOCKER_CONFIG"}
    env.update({"HOME": str(tmp_path), "HANGAR_STATE_DIR": str(tmp_path / "state"),
                "HANGAR_ENVD_PATH": os.environ.get("HANGAR_ENVD_PATH", ""),
                "HANGAR_JAIL_PATH": os.environ.get("HANGAR_JAIL_PATH", ""),
                "HANGAR_LOCAL_NETWORK": "off"})
    return env


def hangar(env, *args, timeout=300):
    return subprocess.run([CLI, *args], env=env, capture_output=True, text=True, timeout=timeout)


def start_pull(env, ref):
    return subprocess.Popen([CLI, "image", "pull", ref], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def holds_pull_lock(pid):
    try:
        return any("/pulls/" in os.readlink(f) and os.readlink(f).endswith(".lock")
                   for f in glob.glob(f"/proc/{pid}/fd/*"))
    except OSError:
        return False


def test_pull_stores_the_image_under_its_name(plain, store):  # noqa: F811
    want = sha(raw_manifest(plain.host, "img", "latest"))
    r = hangar(store, "image", "pull", f"{plain.host}/img")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == want
    info = json.loads(hangar(store, "image", "inspect", f"{plain.host}/img:latest", "--json").stdout)
    assert info["digest"] == want and f"{plain.host}/img:latest" in info["names"]
    # Nothing of the pull is left beside the store's own: its layout went once the image was stored.
    assert not [p for p in glob.glob(os.path.join(store["HANGAR_STATE_DIR"], "images", "pulls", "*"))
                if not p.endswith((".lock", ".done"))]
    # Pulled twice, the same image.
    assert hangar(store, "image", "pull", f"{plain.host}/img:latest").stdout.strip() == want
    bad = hangar(store, "image", "pull", f"{plain.host}/no-such-image")
    assert bad.returncode == 1 and "no-such-image" in bad.stderr


def test_two_pulls_of_one_image_share_one_download(plain, store):  # noqa: F811
    proxy = Holding(plain.host)
    proxy.go.clear()
    ref = f"{proxy.host}/img:latest"
    first = start_pull(store, ref)
    second = None
    try:
        registry.wait_until(lambda: proxy.waiting > 0, 60, "the first pull to ask for a blob")
        second = start_pull(store, ref)
        # The second waits on the first's lock, holding it open.
        registry.wait_until(lambda: holds_pull_lock(second.pid), 60, "the second pull to wait for the first")
        proxy.go.set()
        out1, err1 = first.communicate(timeout=120)
        out2, err2 = second.communicate(timeout=120)
    finally:
        proxy.go.set()
        for p in (first, second):
            if p and p.poll() is None:
                p.kill()
                p.wait()
    assert first.returncode == 0 and second.returncode == 0, (err1, err2)
    assert out1.strip() == out2.strip()
    gets = proxy.blob_gets()
    assert gets and len(gets) == len(set(gets)), gets  # each blob fetched once, by the first


def test_a_killed_pull_leaves_nothing_trusted(plain, store):  # noqa: F811
    proxy = Holding(plain.host)
    proxy.go.clear()
    ref = f"{proxy.host}/img:latest"
    p = start_pull(store, ref)
    try:
        registry.wait_until(lambda: proxy.waiting > 0, 60, "the pull to ask for a blob")
        p.send_signal(signal.SIGKILL)
        p.wait(timeout=30)
    finally:
        proxy.go.set()
    # Nothing stored; the half-made layout is gc's once no pull runs.
    r = hangar(store, "image", "inspect", ref)
    assert r.returncode == 1
    assert hangar(store, "image", "gc").returncode == 0
    assert not [d for d in glob.glob(os.path.join(store["HANGAR_STATE_DIR"], "images", "pulls", "*"))
                if not d.endswith((".lock", ".done"))]
    # A pull that works, and a sandbox from it.
    r = hangar(store, "image", "pull", ref)
    assert r.returncode == 0, r.stderr
    if os.geteuid() != 0 or not store["HANGAR_JAIL_PATH"]:
        return
    sid = hangar(store, "sandbox", "create", "--template", ref)
    assert sid.returncode == 0, sid.stderr
    sid = sid.stdout.strip()
    try:
        out = hangar(store, "sandbox", "exec", sid, "--", "echo from-the-image; ls /bin/busybox")
        assert out.returncode == 0, out.stderr
        assert out.stdout.split() == ["from-the-image", "/bin/busybox"]
    finally:
        hangar(store, "sandbox", "kill", sid)


def test_a_pull_stopped_by_a_signal_says_so(plain, store):  # noqa: F811
    proxy = Holding(plain.host)
    proxy.go.clear()
    p = start_pull(store, f"{proxy.host}/layered:v1")
    try:
        registry.wait_until(lambda: proxy.waiting > 0, 60, "the pull to ask for a blob")
        p.send_signal(signal.SIGTERM)
        proxy.go.set()
        _, err = p.communicate(timeout=60)
    finally:
        proxy.go.set()
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 128 + signal.SIGTERM, err
    assert hangar(store, "image", "inspect", f"{proxy.host}/layered:v1").returncode == 1


@pytest.fixture
def fake_cloud(tmp_path):
    try:
        fake = FakeE2B("cloud", api_key="k-test")
    except FakeE2BMissing:
        pytest.skip("FAKE_E2B is not built (tests/fakes)")
    with fake:
        yield dict(fake.settings(), HANGAR_TIERS='{"heavy":["e2b"]}')


def test_publish_builds_one_template_per_image_digest(plain, store, fake_cloud, tmp_path):  # noqa: F811
    # The tag and the digest of one image are one image: the digest is asked of the registry.
    digest = sha(raw_manifest(plain.host, "img", "latest"))
    envs = tmp_path / "environments.json"
    envs.write_text(json.dumps({"by-tag": {"tier": "heavy", "image": f"{plain.host}/img:latest"},
                                "by-digest": {"tier": "heavy", "image": f"{plain.host}/img@{digest}"}}))
    env = dict(store, HANGAR_ENVIRONMENTS_FILE=str(envs), **fake_cloud)
    first = json.loads(hangar(env, "environment", "publish", "by-tag", "--json").stdout)
    assert [(x["action"], x["digest"]) for x in first] == [("built", digest)], first
    second = json.loads(hangar(env, "environment", "publish", "by-digest", "--json").stdout)
    assert [(x["action"], x["template"]) for x in second] == [("reused", first[0]["template"])], second
