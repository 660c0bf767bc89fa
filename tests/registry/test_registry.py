"""registry_fetch against Debian's docker-registry: http, TLS, basic and token auth, indexes."""
import hashlib
import http.client
import json
import os
import platform
import subprocess

import pytest

import registry

EINVAL, EREFUSED, ENOTFOUND, EUNAVAILABLE = -1, -12, -15, -4

OCI_INDEX = "application/vnd.oci.image.index.v1+json"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
DOCKER_LIST = "application/vnd.docker.distribution.manifest.list.v2+json"
DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"


def goarch():
    m = platform.machine()
    return {"x86_64": "amd64", "aarch64": "arm64"}.get(m, m)


def sha(data):
    return "sha256:" + hashlib.sha256(data).hexdigest()


def raw_manifest(host, name, ref, accept=OCI_MANIFEST):
    c = http.client.HTTPConnection(*host.split(":"), timeout=30)
    c.request("GET", f"/v2/{name}/manifests/{ref}", headers={"Accept": accept})
    r = c.getresponse()
    body = r.read()
    assert r.status == 200, body
    return body


def upload_blob(host, name, data):
    c = http.client.HTTPConnection(*host.split(":"), timeout=30)
    c.request("POST", f"/v2/{name}/blobs/uploads/")
    r = c.getresponse()
    r.read()
    assert r.status == 202, r.status
    loc = r.getheader("Location")
    loc = loc.split(host, 1)[1] if host in loc else loc
    c.request("PUT", f"{loc}{'&' if '?' in loc else '?'}digest={sha(data)}", body=data,
              headers={"Content-Type": "application/octet-stream"})
    r = c.getresponse()
    assert r.status == 201, r.read()
    r.read()
    return sha(data)


def put_manifest(host, name, ref, data, mt):
    c = http.client.HTTPConnection(*host.split(":"), timeout=30)
    c.request("PUT", f"/v2/{name}/manifests/{ref}", body=data, headers={"Content-Type": mt})
    r = c.getresponse()
    body = r.read()
    assert r.status == 201, body
    return sha(data)


def check_layout(d, digest, ref_name):
    """The layout names exactly digest, every blob is its own sha256, and skopeo reads it."""
    idx = json.load(open(f"{d}/index.json"))
    assert [m["digest"] for m in idx["manifests"]] == [digest]
    assert idx["manifests"][0]["annotations"]["org.opencontainers.image.ref.name"] == ref_name
    assert json.load(open(f"{d}/oci-layout")) == {"imageLayoutVersion": "1.0.0"}
    names = os.listdir(f"{d}/blobs/sha256")
    for n in names:
        assert hashlib.sha256(open(f"{d}/blobs/sha256/{n}", "rb").read()).hexdigest() == n
    man = json.loads(open(f"{d}/blobs/sha256/{digest[7:]}", "rb").read())
    want = {digest[7:], man["config"]["digest"][7:]} | {layer["digest"][7:] for layer in man["layers"]}
    assert set(names) == want
    info = registry.skopeo_inspect_layout(d)
    assert info["Digest"] == digest
    assert info["Layers"] == [layer["digest"] for layer in man["layers"]]
    return man


@pytest.fixture(scope="module")
def plain(images, tmp_path_factory):
    """A plain http docker-registry holding busybox (img:latest) and layered (layered:v1)."""
    r = registry.Registry(str(tmp_path_factory.mktemp("plain")))
    registry.push(f"{images}/busybox", f"{r.host}/img:latest")
    registry.push(f"{images}/layered", f"{r.host}/layered:v1")
    return r


def test_normalize():
    tool = os.environ["REGISTRY_FETCH"]

    def norm(ref):
        p = subprocess.run([tool, "normalize", ref], capture_output=True, text=True)
        return p.stdout.strip() if p.returncode == 0 else p.stderr.strip()

    h = "a" * 64
    assert norm("debian") == "docker.io/library/debian:latest"
    assert norm("debian:12") == "docker.io/library/debian:12"
    assert norm("user/app") == "docker.io/user/app:latest"
    assert norm("index.docker.io/library/debian:12") == "docker.io/library/debian:12"
    assert norm(f"debian@sha256:{h}") == f"docker.io/library/debian@sha256:{h}"
    assert norm("Quay.IO/org/app:v1.2") == "quay.io/org/app:v1.2"
    assert norm("localhost:5000/a/b") == "localhost:5000/a/b:latest"
    assert norm("127.0.0.1:5000/a") == "127.0.0.1:5000/a:latest"
    for bad in ["", "Debian", "debian:", "debian@sha256:abc", f"debian@md5:{h}", "a//b", "-a", "a/../b",
                "debian:.x", "host:99999/a", "deb ian", "deb\nian", "a" * 300,
                "a..b", "a" * 240]:
        out = norm(bad)
        assert out.startswith("error -1: invalid image reference"), (bad, out)


def test_anonymous_http(plain, fetcher, tmp_path):
    want = sha(raw_manifest(plain.host, "img", "latest"))
    d = tmp_path / "out"
    digest = fetcher.ok(f"{plain.host}/img", d)
    assert digest == want
    check_layout(d, digest, f"{plain.host}/img:latest")


def test_blobs_reused_and_repaired(plain, fetcher, tmp_path):
    d = tmp_path / "out"
    digest = fetcher.ok(f"{plain.host}/layered:v1", d)
    man = check_layout(d, digest, f"{plain.host}/layered:v1")
    assert len(man["layers"]) == 3
    rc, out, err = fetcher.run(f"{plain.host}/layered:v1", d)
    assert rc == 0 and out == digest
    assert ", 0 progress calls" in err, err  # nothing downloaded again
    # A blob changed on disk is found, deleted and fetched again.
    victim = d / "blobs" / "sha256" / man["layers"][1]["digest"][7:]
    data = bytearray(victim.read_bytes())
    data[len(data) // 2] ^= 0xFF
    victim.write_bytes(bytes(data))
    (d / "blobs" / "sha256" / ("0" * 64 + ".partial")).write_bytes(b"left by a killed fetch")
    rc, out, err = fetcher.run(f"{plain.host}/layered:v1", d)
    assert rc == 0 and out == digest, err
    assert ", 0 progress calls" not in err
    check_layout(d, digest, f"{plain.host}/layered:v1")


def test_by_digest(plain, fetcher, tmp_path):
    want = sha(raw_manifest(plain.host, "img", "latest"))
    digest = fetcher.ok(f"{plain.host}/img@{want}", tmp_path / "d")
    assert digest == want
    check_layout(tmp_path / "d", want, f"{plain.host}/img@{want}")


def test_missing_image(plain, fetcher, tmp_path):
    fetcher.fails(f"{plain.host}/nothere:latest", tmp_path / "d", ENOTFOUND, f"registry {plain.host}", "404")


def test_https_with_test_ca(images, fetcher, tmp_path):
    ca, cert, key = registry.make_ca(str(tmp_path / "ca"))
    r = registry.Registry(str(tmp_path / "reg"), cert=cert, key=key)
    certdir = tmp_path / "certs"
    certdir.mkdir()
    (certdir / "ca.crt").write_bytes(open(ca, "rb").read())
    registry.push(f"{images}/busybox", f"{r.host}/img:latest", cert_dir=str(certdir))
    d = tmp_path / "out"
    digest = fetcher.ok(f"{r.host}/img", d, env={"HANGAR_REGISTRY_CA_FILE": ca})
    check_layout(d, digest, f"{r.host}/img:latest")
    # Without the CA the certificate is not trusted; nothing is written.
    rc, out, err = fetcher.run(f"{r.host}/img", tmp_path / "out2")
    assert rc == 1 and f"registry {r.host}" in err, err
    assert not os.path.exists(tmp_path / "out2" / "index.json")
    assert os.listdir(tmp_path / "out2" / "blobs" / "sha256") == []
    # A CA file that cannot be read is named, not skipped.
    fetcher.fails(f"{r.host}/img", tmp_path / "out3", -3, "cannot read the CA file /nonexistent/ca.pem",
                  env={"HANGAR_REGISTRY_CA_FILE": "/nonexistent/ca.pem"})


def test_basic_auth_from_config_json(plain, fetcher, tmp_path):
    proxy = registry.AuthProxy(plain.host, "basic", "alice", "s3cret:with:colons")
    d = tmp_path / "out"
    for form in ("auth", "username"):
        f = fetcher.auth_file(proxy.host, "alice", "s3cret:with:colons", form)
        digest = fetcher.ok(f"{proxy.host}/img", d, env={"HANGAR_REGISTRY_AUTH_FILE": f})
        check_layout(d, digest, f"{proxy.host}/img:latest")
    # The default place: $DOCKER_CONFIG/config.json.
    os.replace(f, tmp_path / "config.json")
    fetcher.ok(f"{proxy.host}/img", tmp_path / "o2", env={"DOCKER_CONFIG": str(tmp_path)})
    # No credentials, and wrong ones: refused, naming what is missing; the password is never shown.
    fetcher.fails(f"{proxy.host}/img", tmp_path / "o3", EREFUSED, "needs a user name and password")
    bad = fetcher.auth_file(proxy.host, "alice", "wrong-password")
    err = fetcher.fails(f"{proxy.host}/img", tmp_path / "o4", EREFUSED, "HTTP 401",
                        env={"HANGAR_REGISTRY_AUTH_FILE": bad})
    assert "wrong-password" not in err
    # Credentials for another registry are not sent here.
    other = fetcher.auth_file("other.example:5000", "alice", "s3cret:with:colons")
    before = len(proxy.seen)
    fetcher.fails(f"{proxy.host}/img", tmp_path / "o5", EREFUSED, env={"HANGAR_REGISTRY_AUTH_FILE": other})
    assert len(proxy.seen) > before
    assert all("Authorization" not in h for m, p, h in proxy.seen[before:])


def test_bearer_token(plain, fetcher, tmp_path):
    proxy = registry.AuthProxy(plain.host, "bearer")
    d = tmp_path / "out"
    digest = fetcher.ok(f"{proxy.host}/layered:v1", d)
    check_layout(d, digest, f"{proxy.host}/layered:v1")
    tokens = [p for m, p, h in proxy.seen if p.startswith("/token")]
    assert len(tokens) == 1, tokens  # one token serves the manifest and every blob
    assert "service=test-registry" in tokens[0] and "scope=repository%3Alayered%3Apull" in tokens[0]


def test_bearer_token_that_expires(plain, fetcher, tmp_path):
    """The token expires after the manifest: the blob workers, all refused, renew it once between them."""
    proxy = registry.AuthProxy(plain.host, "bearer", expire_first=True)
    d = tmp_path / "out"
    digest = fetcher.ok(f"{proxy.host}/layered:v1", d)
    check_layout(d, digest, f"{proxy.host}/layered:v1")
    tokens = [p for m, p, h in proxy.seen if p.startswith("/token")]
    assert len(tokens) == 2, tokens
    refused = [p for m, p, h in proxy.seen if "/blobs/" in p]
    assert len(refused) > 4  # some blob requests were refused and made again


def test_bearer_token_with_credentials(plain, fetcher, tmp_path):
    proxy = registry.AuthProxy(plain.host, "bearer", "bob", "pw")
    f = fetcher.auth_file(proxy.host, "bob", "pw")
    digest = fetcher.ok(f"{proxy.host}/img", tmp_path / "o", env={"HANGAR_REGISTRY_AUTH_FILE": f})
    check_layout(tmp_path / "o", digest, f"{proxy.host}/img:latest")
    fetcher.fails(f"{proxy.host}/img", tmp_path / "o2", EREFUSED, "token", "HTTP 401")


def _index(entries, mt):
    return json.dumps({"schemaVersion": 2, "mediaType": mt, "manifests": entries}).encode()


def test_oci_index_picks_this_platform(plain, fetcher, tmp_path):
    real = raw_manifest(plain.host, "img", "latest")
    # A junk manifest for another architecture: its config and layer are not images at all.
    junk_cfg = upload_blob(plain.host, "multi", b'{"architecture":"junk"}')
    junk_layer = upload_blob(plain.host, "multi", b"not a tar")
    junk = json.dumps({"schemaVersion": 2, "mediaType": OCI_MANIFEST,
                       "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                                  "digest": junk_cfg, "size": 23},
                       "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip",
                                   "digest": junk_layer, "size": 9}]}).encode()
    other = "arm64" if goarch() != "arm64" else "amd64"
    put_manifest(plain.host, "multi", sha(junk), junk, OCI_MANIFEST)
    # The real one goes into the same repository.
    subprocess.run(["skopeo", "copy", "--quiet", "--insecure-policy", "--src-tls-verify=false",
                    "--dest-tls-verify=false", f"docker://{plain.host}/img:latest",
                    f"docker://{plain.host}/multi:real"], check=True, capture_output=True)
    plat = {"os": "linux", "architecture": goarch()}
    if goarch() == "arm64":
        plat["variant"] = "v8"
    idx = _index([
        {"mediaType": OCI_MANIFEST, "digest": sha(junk), "size": len(junk),
         "platform": {"os": "linux", "architecture": other}},
        {"mediaType": OCI_MANIFEST, "digest": sha(real), "size": len(real), "platform": plat},
        {"mediaType": OCI_MANIFEST, "digest": sha(junk), "size": len(junk),
         "platform": {"os": "windows", "architecture": goarch()}},
    ], OCI_INDEX)
    put_manifest(plain.host, "multi", "latest", idx, OCI_INDEX)
    d = tmp_path / "out"
    assert fetcher.ok(f"{plain.host}/multi", d) == sha(real)
    check_layout(d, sha(real), f"{plain.host}/multi:latest")
    # An index with nothing for this host says what it has.
    only = _index([{"mediaType": OCI_MANIFEST, "digest": sha(junk), "size": len(junk),
                    "platform": {"os": "linux", "architecture": other}}], OCI_INDEX)
    put_manifest(plain.host, "multi", "foreign", only, OCI_INDEX)
    fetcher.fails(f"{plain.host}/multi:foreign", tmp_path / "o2", ENOTFOUND,
                  f"no image for linux/{goarch()}", f"it has: linux/{other}")


def test_docker_manifest_list(images, plain, fetcher, tmp_path):
    registry.push(f"{images}/busybox", f"{plain.host}/dimg:v2s2", fmt="v2s2")
    real = raw_manifest(plain.host, "dimg", "v2s2", DOCKER_MANIFEST)
    assert json.loads(real)["mediaType"] == DOCKER_MANIFEST
    lst = _index([{"mediaType": DOCKER_MANIFEST, "digest": sha(real), "size": len(real),
                   "platform": {"os": "linux", "architecture": goarch()}}], DOCKER_LIST)
    put_manifest(plain.host, "dimg", "list", lst, DOCKER_LIST)
    d = tmp_path / "out"
    assert fetcher.ok(f"{plain.host}/dimg:list", d) == sha(real)
    check_layout(d, sha(real), f"{plain.host}/dimg:list")
    assert json.load(open(d / "index.json"))["manifests"][0]["mediaType"] == DOCKER_MANIFEST
