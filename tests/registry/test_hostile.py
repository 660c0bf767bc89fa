"""registry_fetch against registries of our own that lie, stall, redirect and loop.

Each is refused naming the problem, and nothing is left in the layout but
what was verified (no index.json, no unverified blob, no .partial file).
"""
import hashlib
import json
import os
import platform
import signal
import subprocess
import threading
import time

import pytest

import registry

EREFUSED, ETIMEOUT, ETOOLARGE, EPROTOCOL, EUNSUPPORTED = -12, -11, -10, -14, -13


@pytest.fixture(scope="module")
def layout(images):
    return registry.Layout(f"{images}/busybox")


def layer_digest(layout):
    return layout.manifest_json["layers"][0]["digest"]


def manifest_answer(data, mt="application/vnd.oci.image.manifest.v1+json", headers=None):
    """A fault answering every manifest request with data (and headers)."""
    def fault(h, kind, ref):
        if kind == "manifest":
            h.reply(200, data, {"Content-Type": mt, **(headers or {})})
            return True
    return fault


def edited_manifest(layout, edit):
    m = json.loads(layout.manifest)
    edit(m)
    return json.dumps(m).encode()


def reply_sized(h, data, announced, headers=None):
    """data with its Content-Length, or unannounced: the body ends when the connection closes."""
    if announced:
        return h.reply(200, data, headers)
    h.reply(200, b"", {**(headers or {}), "Connection": "close"}, length=False)
    try:
        h.wfile.write(data)
    except OSError:
        pass
    h.close_connection = True


def half_then_silence(layout, stop, only=None):
    """A fault sending half of a blob (of only, else of any) and then nothing until stop is set."""
    def fault(h, kind, ref):
        if kind == "blob" and (only is None or ref == only) and not stop.is_set():
            data = layout.blobs[ref]
            h.send_response(200)
            h.send_header("Content-Length", str(len(data)))
            h.end_headers()
            h.wfile.write(data[: len(data) // 2])
            h.wfile.flush()
            stop.wait(60)
            h.close_connection = True
            return True
    return fault


def assert_blobs_verified(d):
    """No .partial file is left, and every blob is its own digest."""
    blobs = f"{d}/blobs/sha256"
    for n in os.listdir(blobs) if os.path.isdir(blobs) else []:
        assert not n.endswith(".partial"), n
        assert hashlib.sha256(open(f"{blobs}/{n}", "rb").read()).hexdigest() == n


def assert_nothing_unverified(d):
    assert not os.path.exists(f"{d}/index.json")
    assert_blobs_verified(d)


def test_blob_digest_mismatch(layout, fetcher, tmp_path):
    bad = layer_digest(layout)

    def fault(h, kind, ref):
        if kind == "blob" and ref == bad:
            data = bytearray(layout.blobs[ref])
            data[100] ^= 1
            h.reply(200, bytes(data))
            return True

    srv = registry.Hostile(layout, fault)
    d = tmp_path / "out"
    fetcher.fails(f"{srv.host}/img", d, EPROTOCOL, f"registry {srv.host}", f"blob {bad}", "layer 1 of 1",
                  "does not match its digest")
    assert_nothing_unverified(d)
    assert not os.path.exists(f"{d}/blobs/sha256/{bad[7:]}")


def test_manifest_digest_mismatch(layout, fetcher, tmp_path):
    # Whatever digest is asked for, this registry answers with its one manifest.
    srv = registry.Hostile(layout, manifest_answer(layout.manifest))
    other = "sha256:" + "0" * 64
    d = tmp_path / "out"
    fetcher.fails(f"{srv.host}/img@{other}", d, EPROTOCOL, f"has digest {layout.manifest_digest}",
                  f"not the {other} asked for")
    assert_nothing_unverified(d)
    # The same bytes by their own digest are fine.
    assert fetcher.ok(f"{srv.host}/img@{layout.manifest_digest}", tmp_path / "ok") == layout.manifest_digest


def test_docker_content_digest_mismatch(layout, fetcher, tmp_path):
    srv = registry.Hostile(layout, manifest_answer(layout.manifest,
                                                   headers={"Docker-Content-Digest": "sha256:" + "1" * 64}))
    fetcher.fails(f"{srv.host}/img", tmp_path / "o", EPROTOCOL, "Docker-Content-Digest")


@pytest.mark.parametrize("announced", [True, False])
def test_oversized_manifest(layout, fetcher, tmp_path, announced):
    big = json.dumps({"schemaVersion": 2, "pad": "x" * (5 << 20)}).encode()

    def fault(h, kind, ref):
        if kind == "manifest":
            reply_sized(h, big, announced, {"Content-Type": "application/vnd.oci.image.manifest.v1+json"})
            return True

    srv = registry.Hostile(layout, fault)
    fetcher.fails(f"{srv.host}/img", tmp_path / "o", ETOOLARGE, "the manifest img:latest", "larger")


@pytest.mark.parametrize("announced", [True, False])
def test_blob_bigger_than_its_size(layout, fetcher, tmp_path, announced):
    victim = layer_digest(layout)

    def fault(h, kind, ref):
        if kind == "blob" and ref == victim:
            reply_sized(h, layout.blobs[ref] + b"\0" * 4096, announced)
            return True

    srv = registry.Hostile(layout, fault)
    d = tmp_path / "o"
    fetcher.fails(f"{srv.host}/img", d, ETOOLARGE, f"blob {victim}")
    assert_nothing_unverified(d)


def test_manifest_redirected_to_another_host(layout, fetcher, tmp_path):
    elsewhere = registry.Hostile(layout, host="127.0.0.2")

    def fault(h, kind, ref):
        if kind == "manifest":
            h.reply(307, b"", {"Location": f"http://{elsewhere.host}/v2/img/manifests/{ref}"})
            return True

    srv = registry.Hostile(layout, fault)
    fetcher.fails(f"{srv.host}/img", tmp_path / "o", EPROTOCOL, "redirected (HTTP 307)", elsewhere.host,
                  "another host")
    assert elsewhere.seen == []


def test_blob_redirect_to_plain_http_refused(layout, fetcher, tmp_path):
    ca, cert, key = registry.make_ca(str(tmp_path / "ca"))
    target = registry.Hostile(layout)

    def fault(h, kind, ref):
        if kind == "blob":
            h.reply(307, b"", {"Location": f"http://{target.host}/v2/img/blobs/{ref}"})
            return True

    srv = registry.Hostile(layout, fault, tls=(cert, key))
    d = tmp_path / "o"
    fetcher.fails(f"{srv.host}/img", d, EREFUSED, "redirected to plain http", target.host,
                  env={"HANGAR_REGISTRY_CA_FILE": ca})
    assert target.seen == []
    assert_nothing_unverified(d)


def test_blob_redirect_followed_once_without_credentials(layout, fetcher, tmp_path):
    target = registry.Hostile(layout)
    hops = registry.Hostile(layout, lambda h, kind, ref: kind == "blob" and h.reply(
        302, b"", {"Location": f"http://{target.host}/v2/img/blobs/{ref}"}) is None)

    def fault(h, kind, ref):
        if h.headers.get("Authorization") is None:
            h.reply(401, b"{}", {"WWW-Authenticate": 'Basic realm="r"'})
            return True
        if kind == "blob":
            h.reply(307, b"", {"Location": f"http://{target.host}/v2/img/blobs/{ref}"})
            return True

    srv = registry.Hostile(layout, fault)
    f = fetcher.auth_file(srv.host, "u", "p")
    d = tmp_path / "o"
    assert fetcher.ok(f"{srv.host}/img", d, env={"HANGAR_REGISTRY_AUTH_FILE": f}) == layout.manifest_digest
    assert len(target.seen) == 2  # the config and the layer
    assert all("Authorization" not in hd for m, p, hd in target.seen)
    # A redirect to a redirect is not followed.
    srv2 = registry.Hostile(layout, lambda h, kind, ref: kind == "blob" and h.reply(
        307, b"", {"Location": f"http://{hops.host}/v2/img/blobs/{ref}"}) is None)
    fetcher.fails(f"{srv2.host}/img", tmp_path / "o2", EPROTOCOL, "redirected again")


def test_stalled_blob(layout, fetcher, tmp_path):
    stop = threading.Event()
    srv = registry.Hostile(layout, half_then_silence(layout, stop))
    t0 = time.monotonic()
    d = tmp_path / "o"
    fetcher.fails(f"{srv.host}/img", d, ETIMEOUT, "sent nothing for 1 s", "HANGAR_REGISTRY_STALL_SECONDS",
                  env={"HANGAR_REGISTRY_STALL_SECONDS": "1"})
    stop.set()
    assert time.monotonic() - t0 < 20
    assert_nothing_unverified(d)


def test_slow_manifest(layout, fetcher, tmp_path):
    stop = threading.Event()

    def fault(h, kind, ref):
        if kind == "manifest":
            h.send_response(200)
            h.send_header("Content-Length", str(len(layout.manifest)))
            h.end_headers()
            for b in layout.manifest:
                if stop.wait(0.3):
                    break
                try:
                    h.wfile.write(bytes([b]))
                    h.wfile.flush()
                except OSError:
                    break
            h.close_connection = True
            return True

    srv = registry.Hostile(layout, fault)
    t0 = time.monotonic()
    fetcher.fails(f"{srv.host}/img", tmp_path / "o", ETIMEOUT, "did not finish", "HANGAR_REQUEST_TIMEOUT_SECONDS",
                  env={"HANGAR_REQUEST_TIMEOUT_SECONDS": "2", "HANGAR_REGISTRY_STALL_SECONDS": "5"})
    stop.set()
    assert time.monotonic() - t0 < 20


def test_registry_that_never_answers(fetcher, tmp_path):
    s = registry.Silent()
    t0 = time.monotonic()
    fetcher.fails(f"{s.host}/img", tmp_path / "o", ETIMEOUT, f"registry {s.host}",
                  env={"HANGAR_REGISTRY_STALL_SECONDS": "1", "HANGAR_REQUEST_TIMEOUT_SECONDS": "3"}, timeout=60)
    assert time.monotonic() - t0 < 30


def test_401_loop(layout, fetcher, tmp_path):
    def fault(h, kind, ref):
        h.reply(401, b"{}", {"WWW-Authenticate": f'Bearer realm="http://{srv.host}/token",service="s"'})
        return True

    srv = registry.Hostile(layout, fault)
    srv.handle_token = True
    orig = srv.handle

    def handle(h):
        if h.path.startswith("/token"):
            srv.note(h)
            return h.reply(200, b'{"token":"t"}')
        return orig(h)

    srv.handle = handle
    fetcher.fails(f"{srv.host}/img", tmp_path / "o", EREFUSED, "HTTP 401", "even with the token")
    manifests = [p for m, p, hd in srv.seen if "/manifests/" in p]
    assert len(manifests) == 2  # asked once, and once more with the token: no loop


def test_token_realm_on_another_host_gets_no_credentials(layout, fetcher, tmp_path):
    realm = registry.Hostile(layout, host="127.0.0.2")
    realm.handle = lambda h: (realm.note(h), h.reply(401, b"{}", {"WWW-Authenticate": 'Basic realm="give"'}))

    def fault(h, kind, ref):
        h.reply(401, b"{}", {"WWW-Authenticate": f'Bearer realm="http://{realm.host}/token",service="s"'})
        return True

    srv = registry.Hostile(layout, fault)
    f = fetcher.auth_file(srv.host, "carol", "do-not-leak")
    err = fetcher.fails(f"{srv.host}/img", tmp_path / "o", EREFUSED, "only sent to the registry's own site",
                        env={"HANGAR_REGISTRY_AUTH_FILE": f})
    assert "do-not-leak" not in err
    assert len(realm.seen) == 1
    assert "Authorization" not in realm.seen[0][2]


def test_schema1_refused(layout, fetcher, tmp_path):
    v1 = json.dumps({"schemaVersion": 1, "name": "img", "tag": "latest", "fsLayers": []}).encode()
    srv = registry.Hostile(layout, manifest_answer(v1, "application/vnd.docker.distribution.manifest.v1+prettyjws"))
    fetcher.fails(f"{srv.host}/img", tmp_path / "o", EUNSUPPORTED, "schema 1")


def test_foreign_layer_refused(layout, fetcher, tmp_path):
    def foreign(m):
        m["layers"][0]["urls"] = ["https://example.invalid/layer.tar.gz"]
        m["layers"][0]["mediaType"] = "application/vnd.oci.image.layer.nondistributable.v1.tar+gzip"

    srv = registry.Hostile(layout, manifest_answer(edited_manifest(layout, foreign)))
    fetcher.fails(f"{srv.host}/img", tmp_path / "o", EUNSUPPORTED, "foreign", "layer 1 of 1")
    assert not any("/blobs/" in p for m_, p, hd in srv.seen)


def test_duplicate_keys_refused(layout, fetcher, tmp_path):
    dup = layout.manifest.decode().rstrip()[:-1] + ',"schemaVersion":2}'
    srv = registry.Hostile(layout, manifest_answer(dup.encode()))
    fetcher.fails(f"{srv.host}/img", tmp_path / "o", EPROTOCOL, "not a strict JSON object", "duplicate")


def test_digest_path_traversal_refused(layout, fetcher, tmp_path):
    def traverse(m):
        m["layers"][0]["digest"] = "sha256:../../../../etc/passwd"

    srv = registry.Hostile(layout, manifest_answer(edited_manifest(layout, traverse)))
    fetcher.fails(f"{srv.host}/img", tmp_path / "o", EPROTOCOL, "not sha256:<64 hex>")


def test_cancel_leaves_nothing_unverified(layout, fetcher, tmp_path):
    srv = registry.Hostile(layout)
    d = tmp_path / "o"
    fetcher.fails(f"{srv.host}/img", d, -18, "cancelled", env={"REGISTRY_FETCH_CANCEL_AFTER": "1"})
    assert_nothing_unverified(d)


def _non_loopback_address():
    import socket
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        s.connect(("192.0.2.254", 9))  # no packet is sent: this only picks the outgoing address
        addr = s.getsockname()[0]
    except OSError:
        return None
    finally:
        s.close()
    return None if addr.startswith("127.") else addr


def test_plain_http_only_when_allowed(layout, fetcher, tmp_path):
    addr = _non_loopback_address()
    if not addr:
        pytest.skip("no non-loopback IPv4 address to serve on")
    srv = registry.Hostile(layout, host=addr)
    # Not loopback and not named: https only, and this registry speaks http.
    fetcher.fails(f"{srv.host}/img", tmp_path / "o", -4, f"registry {srv.host}")
    assert srv.seen == []
    # Named in HANGAR_REGISTRY_INSECURE (with its port, or the host alone): http is used.
    for entry in (srv.host, f"other.example, {addr}"):
        d = tmp_path / entry.replace(" ", "").replace(",", "_").replace(":", "_")
        assert fetcher.ok(f"{srv.host}/img", d, env={"HANGAR_REGISTRY_INSECURE": entry}) == layout.manifest_digest
    # Another port of the same host is not named by host:port.
    fetcher.fails(f"{srv.host}/img", tmp_path / "o2", -4, env={"HANGAR_REGISTRY_INSECURE": f"{addr}:1"})
    # A malformed list is refused naming the setting.
    fetcher.fails(f"{srv.host}/img", tmp_path / "o3", -3, "HANGAR_REGISTRY_INSECURE",
                  env={"HANGAR_REGISTRY_INSECURE": "a b"})


@pytest.mark.parametrize("challenge,code,words", [
    ('Bearer service="s",scope="repository:img:pull"', EPROTOCOL, ["no usable token service", 'realm ""']),
    ('Bearer realm="file:///etc/passwd"', EPROTOCOL, ["no usable token service", "file:///etc/passwd"]),
    ('Negotiate', EREFUSED, ["authentication we do not speak", "Negotiate"]),
    ('', EREFUSED, ["no WWW-Authenticate"]),
])
def test_unusable_challenges(layout, fetcher, tmp_path, challenge, code, words):
    def fault(h, kind, ref):
        h.reply(401, b"{}", {"WWW-Authenticate": challenge} if challenge else {})
        return True

    srv = registry.Hostile(layout, fault)
    fetcher.fails(f"{srv.host}/img", tmp_path / "o", code, *words)
    assert len(srv.seen) == 1  # nothing else was asked, of anyone


def test_config_over_its_cap(layout, fetcher, tmp_path):
    def huge(m):
        m["config"]["size"] = (8 << 20) + 1

    srv = registry.Hostile(layout, manifest_answer(edited_manifest(layout, huge)))
    fetcher.fails(f"{srv.host}/img", tmp_path / "o", ETOOLARGE, "the config", "over the 8388608 allowed")
    assert not any("/blobs/" in p for m_, p, hd in srv.seen)


def test_killed_fetch_then_a_fetch_that_works(layout, fetcher, tmp_path):
    stop = threading.Event()
    victim = layer_digest(layout)
    srv = registry.Hostile(layout, half_then_silence(layout, stop, victim))
    d = tmp_path / "o"
    partial = d / "blobs" / "sha256" / (victim[7:] + ".partial")
    p = subprocess.Popen([os.environ["REGISTRY_FETCH"], "fetch", f"{srv.host}/img", str(d)], env=fetcher.env(),
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        registry.wait_until(lambda: partial.exists() and partial.stat().st_size > 0, 30, "a half-written blob")
    finally:
        p.send_signal(signal.SIGKILL)
        p.wait(10)
        stop.set()
    assert not (d / "index.json").exists()
    assert not (d / "blobs" / "sha256" / victim[7:]).exists()
    assert fetcher.ok(f"{srv.host}/img", d) == layout.manifest_digest
    assert not partial.exists()
    assert len(os.listdir(d / "blobs" / "sha256")) == 3  # manifest, config, layer
    assert_blobs_verified(d)


def test_encoded_blob_refused(layout, fetcher, tmp_path):
    victim = layer_digest(layout)

    def fault(h, kind, ref):
        if kind == "blob" and ref == victim:
            h.reply(200, layout.blobs[ref], {"Content-Encoding": "gzip"})
            return True

    srv = registry.Hostile(layout, fault)
    d = tmp_path / "o"
    fetcher.fails(f"{srv.host}/img", d, EPROTOCOL, f"blob {victim}", "an encoding we did not ask for (gzip)")
    assert_nothing_unverified(d)


def test_index_naming_an_index_refused(layout, fetcher, tmp_path):
    arch = {"x86_64": "amd64", "aarch64": "arm64"}.get(platform.machine(), platform.machine())
    inner = json.dumps({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
                        "manifests": []}).encode()
    inner_digest = layout.add(inner)
    outer = json.dumps({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
                        "manifests": [{"mediaType": "application/vnd.oci.image.manifest.v1+json",
                                       "digest": inner_digest, "size": len(inner),
                                       "platform": {"os": "linux", "architecture": arch}}]}).encode()

    def fault(h, kind, ref):
        if kind == "manifest":
            data = inner if ref == inner_digest else outer
            h.reply(200, data, {"Content-Type": "application/vnd.oci.image.index.v1+json"})
            return True

    srv = registry.Hostile(layout, fault)
    fetcher.fails(f"{srv.host}/img", tmp_path / "o", EUNSUPPORTED, "names another index", inner_digest)
