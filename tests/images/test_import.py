"""Imports that work: a busybox root, a three-layer image with deletions, the
same image as an OCI layout and as a docker-save archive, gzip, zstd and
plain layers; the unpacked layers checked on disk."""

import json
import os
import stat

import imagekit as kit


def test_a_busybox_rootfs_becomes_a_one_layer_image(store, tmp_path):
    raw = kit.tar_bytes(kit.busybox_members())
    path = tmp_path / "rootfs.tar.gz"
    path.write_bytes(kit.compress(raw, "gzip"))
    info = store.json("image", "import", str(path), "--name", "bb:1")
    assert info["names"] == ["docker.io/library/bb:1"]
    assert info["layers"] == [kit.sha256(raw)]
    assert info["os"] == "linux"
    root = store.layer_root(info["layers"][0])
    with open("/bin/busybox", "rb") as a, open(os.path.join(root, "bin", "busybox"), "rb") as b:
        assert a.read() == b.read()
    assert stat.S_IMODE(os.stat(os.path.join(root, "bin", "busybox")).st_mode) == 0o755
    assert os.readlink(os.path.join(root, "bin", "sh")) == "busybox"
    assert info["size"] == os.path.getsize("/bin/busybox") + len(b"ID=busybox\n")
    # The manifest and config made for it are real, verified blobs.
    blobs = store.entries("blobs/sha256")
    assert info["digest"][7:] in blobs and info["config_digest"][7:] in blobs
    with open(os.path.join(store.dir, "blobs", "sha256", info["digest"][7:]), "rb") as f:
        manifest = f.read()
    assert kit.sha256(manifest) == info["digest"]
    assert json.loads(manifest)["layers"][0]["digest"] == kit.sha256(path.read_bytes())
    # The same tarball gives the same image: one record, one layer.
    again = store.ok("image", "import", str(path), "--name", "bb:2").stdout.decode().strip()
    assert again == info["digest"]
    assert len(store.json("image", "list")) == 1
    assert store.layer_dirs() == [info["layers"][0][7:]]
    assert sorted(store.json("image", "inspect", again)["names"]) == ["docker.io/library/bb:1",
                                                                      "docker.io/library/bb:2"]


def test_a_rootfs_needs_a_name(store, tmp_path):
    path = tmp_path / "rootfs.tar"
    path.write_bytes(kit.tar_bytes(kit.busybox_members()))
    assert "name is required" in store.fails("image", "import", str(path))
    assert store.entries("images") == [] and store.layer_dirs() == []


def three_layers():
    with open("/bin/busybox", "rb") as f:
        bb = f.read()
    base = kit.tar_bytes([
        ("dir", "bin", 0o755),
        ("file", "bin/busybox", bb, 0o755),
        ("symlink", "bin/sh", "busybox"),
        ("hardlink", "bin/ls", "bin/busybox"),
        ("dir", "etc", 0o755),
        ("file", "etc/gone", b"deleted above\n", 0o644),
        ("file", "etc/owned", b"by 1000\n", 0o640, 1000, 1001),
        ("file", "etc/setuid", b"#!/bin/sh\n", 0o4755),
        ("dir", "opq", 0o750),
        ("file", "opq/old", b"hidden above\n", 0o644),
        ("fifo", "run-fifo"),
    ])
    middle = kit.tar_bytes([
        ("dir", "etc", 0o755),
        ("file", "etc/.wh.gone", b"", 0o644),
        ("dir", "opq", 0o700),
        ("file", "opq/.wh..wh..opq", b"", 0o644),
        ("file", "opq/new", b"only this\n", 0o600),
    ])
    top = kit.tar_bytes([
        ("dir", "srv", 0o755),
        ("file", "./srv//top.txt", b"top\n", 0o644),
    ])
    return base, middle, top


CONFIG = {"Env": ["PATH=/bin", "GREETING=hello world"], "WorkingDir": "/srv", "User": "1000:1001",
          "Cmd": ["/bin/sh"]}


def check_layers(store, diff_ids):
    base, middle, top = (store.layer_root(d) for d in diff_ids)
    st = os.lstat(os.path.join(middle, "etc", "gone"))
    assert stat.S_ISCHR(st.st_mode) and os.major(st.st_rdev) == 0 and os.minor(st.st_rdev) == 0
    opq = os.path.join(middle, "opq")
    assert os.getxattr(opq, "user.overlay.opaque") == b"y"
    assert os.getxattr(opq, "trusted.overlay.opaque") == b"y"  # the suite runs as root
    assert stat.S_IMODE(os.stat(opq).st_mode) == 0o700
    assert not os.path.exists(os.path.join(middle, "opq", ".wh..wh..opq"))
    assert stat.S_IMODE(os.stat(os.path.join(middle, "opq", "new")).st_mode) == 0o600
    owned = os.stat(os.path.join(base, "etc", "owned"))
    assert (owned.st_uid, owned.st_gid, stat.S_IMODE(owned.st_mode)) == (1000, 1001, 0o640)
    assert stat.S_IMODE(os.stat(os.path.join(base, "etc", "setuid")).st_mode) == 0o4755
    assert os.stat(os.path.join(base, "etc", "setuid")).st_mtime == kit.MTIME
    assert os.stat(os.path.join(base, "bin")).st_mtime == kit.MTIME
    assert os.readlink(os.path.join(base, "bin", "sh")) == "busybox"
    assert os.stat(os.path.join(base, "bin", "ls")).st_ino == os.stat(os.path.join(base, "bin", "busybox")).st_ino
    assert stat.S_ISFIFO(os.lstat(os.path.join(base, "run-fifo")).st_mode)
    assert stat.S_IMODE(os.stat(os.path.join(base, "opq")).st_mode) == 0o750
    with open(os.path.join(top, "srv", "top.txt")) as f:
        assert f.read() == "top\n"
    for d in diff_ids:
        with open(os.path.join(store.dir, "layers", d[7:], "layer.json")) as f:
            meta = json.load(f)
        assert meta["diff_id"] == d


def test_a_three_layer_layout_with_whiteouts_and_an_opaque_directory(store, tmp_path):
    base, middle, top = three_layers()
    digest, _, cfg = kit.oci_layout(str(tmp_path / "layout"), [(base, "gzip"), (middle, "zstd"), (top, None)],
                                    config=CONFIG, name="registry.example:5000/team/app:v1")
    info = store.json("image", "import", str(tmp_path / "layout"), "--name", "app")
    assert info["digest"] == digest and info["config_digest"] == cfg
    assert info["names"] == ["registry.example:5000/team/app:v1", "docker.io/library/app:latest"]
    assert info["layers"] == [kit.sha256(base), kit.sha256(middle), kit.sha256(top)]
    assert info["env"] == CONFIG["Env"] and info["workdir"] == "/srv" and info["user"] == "1000:1001"
    assert info["in_use"] is False
    check_layers(store, info["layers"])
    with open(os.path.join(store.dir, "images", digest[7:] + ".json")) as f:
        record = json.load(f)
    assert record["config"]["Cmd"] == ["/bin/sh"]
    assert record["size"] == info["size"] > os.path.getsize("/bin/busybox")


def test_a_docker_save_archive_shares_the_layout_s_layers(store, tmp_path):
    base, middle, top = three_layers()
    kit.oci_layout(str(tmp_path / "layout"), [(base, "gzip"), (middle, "zstd"), (top, None)], config=CONFIG)
    first = store.json("image", "import", str(tmp_path / "layout"), "--name", "app:oci")
    layers_before = store.layer_dirs()
    kit.docker_archive(str(tmp_path / "saved.tar"), [base, middle, top], ["app:docker", "<none>:<none>", "other/app:2"],
                       config=CONFIG)
    saved = store.json("image", "import", str(tmp_path / "saved.tar"))
    assert saved["layers"] == first["layers"]
    assert saved["names"] == ["docker.io/library/app:docker", "docker.io/other/app:2"]
    assert store.layer_dirs() == layers_before  # each layer unpacked once, shared
    check_layers(store, saved["layers"])
    assert len(store.json("image", "list")) == 2


def test_a_gzip_docker_archive_with_gzip_layers(store, tmp_path):
    raw = kit.tar_bytes(kit.busybox_members())
    kit.docker_archive(str(tmp_path / "saved.tar"), [raw], ["bb:gz"], compression="gzip")
    (tmp_path / "saved.tar.gz").write_bytes(kit.compress((tmp_path / "saved.tar").read_bytes(), "gzip"))
    info = store.json("image", "import", str(tmp_path / "saved.tar.gz"))
    assert info["layers"] == [kit.sha256(raw)] and info["names"] == ["docker.io/library/bb:gz"]


def test_a_zstd_rootfs(store, tmp_path):
    raw = kit.tar_bytes(kit.busybox_members())
    (tmp_path / "rootfs.tar.zst").write_bytes(kit.compress(raw, "zstd"))
    info = store.json("image", "import", str(tmp_path / "rootfs.tar.zst"), "--name", "bb:zst")
    assert info["layers"] == [kit.sha256(raw)]


def test_names_move_and_refs_resolve(store, tmp_path):
    a = tmp_path / "a.tar"
    b = tmp_path / "b.tar"
    a.write_bytes(kit.tar_bytes([("file", "a", b"a", 0o644)]))
    b.write_bytes(kit.tar_bytes([("file", "b", b"b", 0o644)]))
    da = store.ok("image", "import", str(a), "--name", "x:1").stdout.decode().strip()
    db = store.ok("image", "import", str(b), "--name", "docker.io/library/x:1").stdout.decode().strip()
    assert store.json("image", "inspect", "x:1")["digest"] == db
    assert store.json("image", "inspect", da)["names"] == []
    assert store.json("image", "inspect", da[7:19])["digest"] == da
    assert "give more digits" not in store.fails("image", "inspect", da[7:18])
    assert "no image docker.io/library/nope:latest" in store.fails("image", "inspect", "nope")
    assert "not sha256" in store.fails("image", "inspect", "sha256:1234")
    listed = store.json("image", "list")
    assert [i["digest"] for i in listed] == [db, da]  # newest first


def test_rm_removes_layers_no_other_image_has(store, tmp_path):
    shared = kit.tar_bytes([("file", "shared", b"s", 0o644)])
    own = kit.tar_bytes([("file", "own", b"o", 0o644)])
    kit.oci_layout(str(tmp_path / "one"), [(shared, "gzip"), (own, "gzip")])
    kit.oci_layout(str(tmp_path / "two"), [(shared, "gzip")])
    one = store.json("image", "import", str(tmp_path / "one"), "--name", "one")
    two = store.json("image", "import", str(tmp_path / "two"), "--name", "two")
    assert len(store.layer_dirs()) == 2
    assert store.json("image", "rm", "one") == [{"image": "one", "removed": True}]
    assert store.layer_dirs() == [kit.sha256(shared)[7:]]
    assert one["digest"][7:] not in store.entries("blobs/sha256")
    assert two["digest"][7:] in store.entries("blobs/sha256")
    r = store.run("image", "rm", "one", "--json")
    assert r.returncode == 1
    out = json.loads(r.stdout)
    assert out[0]["removed"] is False and out[0]["error"] == "not_found" and "one:latest" in out[0]["message"]


def test_the_progress_bar_is_for_terminals_only(store, tmp_path):
    import pty
    import subprocess
    layers = [(kit.tar_bytes([("file", f"f{i}", os.urandom(1 << 20), 0o644)]), "gzip") for i in range(2)]
    kit.oci_layout(str(tmp_path / "layout"), layers)
    # Into a pipe: the digest on stdout, nothing on stderr.
    r = store.ok("image", "import", str(tmp_path / "layout"), "--name", "piped")
    assert r.stderr == b"" and r.stdout.decode().startswith("sha256:")
    store.ok("image", "rm", "piped")
    # On a terminal: layers and bytes on stderr, the digest still on stdout.
    leader, follower = pty.openpty()
    p = subprocess.Popen([store.cli, "image", "import", str(tmp_path / "layout"), "--name", "tty"], env=store.env,
                         stdout=subprocess.PIPE, stderr=follower)
    os.close(follower)
    out, _ = p.communicate(timeout=120)
    seen = b""
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:
            break
        if not chunk:
            break
        seen += chunk
    os.close(leader)
    assert p.returncode == 0 and out.decode().startswith("sha256:")
    text = seen.decode()
    assert "layer 0/2" in text and "layer 2/2" in text and "MiB" in text
    assert text.endswith("\r\x1b[K")  # the bar is cleared at the end


def test_a_layout_in_a_tar(store, tmp_path):
    import tarfile
    raw = kit.tar_bytes(kit.busybox_members())
    digest, _, _ = kit.oci_layout(str(tmp_path / "layout"), [(raw, "zstd")], name="docker.io/library/in-tar:1")
    with tarfile.open(tmp_path / "layout.tar", "w") as t:
        t.add(str(tmp_path / "layout"), arcname=".")
    info = store.json("image", "import", str(tmp_path / "layout.tar"))
    assert info["digest"] == digest and info["names"] == ["docker.io/library/in-tar:1"]


def write_index(root, entries):
    with open(os.path.join(root, "index.json"), "w") as f:
        json.dump({"schemaVersion": 2, "manifests": entries}, f)


def test_an_index_resolves_to_this_machine_s_platform(store, tmp_path):
    root = str(tmp_path / "layout")
    raw = kit.tar_bytes([("file", "amd", b"a", 0o644)])
    digest, _, _ = kit.oci_layout(root, [(raw, "gzip")])
    size = os.path.getsize(os.path.join(root, "blobs", "sha256", digest[7:]))
    # A nested index naming an arm64 manifest (absent: it must not be read) and ours.
    nested = json.dumps({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json", "manifests": [
        {"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": kit.sha256(b"arm"), "size": 3,
         "platform": {"os": "linux", "architecture": "arm64"}},
        {"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": digest, "size": size,
         "platform": {"os": "linux", "architecture": "amd64"}},
    ]}).encode()
    nd = kit.write_blob(root, nested)
    write_index(root, [{"mediaType": "application/vnd.oci.image.index.v1+json", "digest": nd, "size": len(nested),
                        "annotations": {"io.containerd.image.name": "docker.io/library/multi:1"}}])
    info = store.json("image", "import", root)
    assert info["digest"] == digest and info["names"] == ["docker.io/library/multi:1"]
    # Two images for this platform: which one is meant cannot be told.
    other, _, _ = kit.oci_layout(str(tmp_path / "other"), [(kit.tar_bytes([("file", "b", b"b", 0o644)]), None)])
    with open(os.path.join(tmp_path, "other", "blobs", "sha256", other[7:]), "rb") as f:
        kit.write_blob(root, f.read())
    write_index(root, [
        {"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": digest, "size": size},
        {"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": other,
         "size": os.path.getsize(os.path.join(root, "blobs", "sha256", other[7:]))},
    ])
    assert "holds 2 images" in store.fails("image", "import", root)


def test_the_store_s_settings_are_checked(store, tmp_path):
    msg = store.fails("image", "list", env={"HANGAR_IMAGE_CACHE_MB": "0"})
    assert "HANGAR_IMAGE_CACHE_MB" in msg
    assert "HANGAR_IMAGE_DIR" in store.fails("image", "list", env={"HANGAR_IMAGE_DIR": "relative/dir"})
    # A store other users could reach is refused, not used.
    open_dir = tmp_path / "open"
    open_dir.mkdir()
    os.chmod(open_dir, 0o755)
    assert "mode 0700" in store.fails("image", "list", env={"HANGAR_IMAGE_DIR": str(open_dir)})
    assert os.listdir(open_dir) == []
    # Unset, the store is the state directory's images/, made 0700.
    env = dict(store.env)
    del env["HANGAR_IMAGE_DIR"]
    import subprocess
    r = subprocess.run([store.cli, "image", "list", "--json"], env=env, capture_output=True, timeout=60)
    assert r.returncode == 0 and json.loads(r.stdout) == []
    st = os.stat(os.path.join(store.env["HANGAR_STATE_DIR"], "images"))
    assert stat.S_IMODE(st.st_mode) == 0o700


def test_a_docker_archive_whose_layer_is_a_symlink_to_another(store, tmp_path):
    import hashlib
    import io
    import tarfile
    raw = kit.tar_bytes([("dir", "d", 0o755)])
    cfg = json.dumps(kit.config_for([raw, raw])).encode()
    hexd = hashlib.sha256(raw).hexdigest()
    manifest = [{"Config": "config.json", "RepoTags": ["dup:1"], "Layers": [f"{hexd}/layer.tar", "second/layer.tar"]}]
    with tarfile.open(tmp_path / "saved.tar", "w") as t:
        for name, data in (("config.json", cfg), (f"{hexd}/layer.tar", raw),
                           ("manifest.json", json.dumps(manifest).encode())):
            ti = tarfile.TarInfo(name)
            ti.size = len(data)
            t.addfile(ti, io.BytesIO(data))
        ti = tarfile.TarInfo("second/layer.tar")
        ti.type = tarfile.SYMTYPE
        ti.linkname = f"../{hexd}/layer.tar"
        t.addfile(ti)
    info = store.json("image", "import", str(tmp_path / "saved.tar"))
    assert info["layers"] == [kit.sha256(raw)] * 2 and store.layer_dirs() == [hexd]
    # A link that climbs out of the archive is refused, naming it.
    manifest[0]["Layers"][1] = "third/layer.tar"
    (tmp_path / "outside.tar").write_bytes(raw)
    with tarfile.open(tmp_path / "saved.tar", "a") as t:
        ti = tarfile.TarInfo("third/layer.tar")
        ti.type = tarfile.SYMTYPE
        ti.linkname = "../../outside.tar"
        t.addfile(ti)
        data = json.dumps(manifest).encode()
        ti = tarfile.TarInfo("manifest.json")
        ti.size = len(data)
        t.addfile(ti, io.BytesIO(data))
    assert 'member "third/layer.tar"' in store.fails("image", "import", str(tmp_path / "saved.tar"))


def test_the_last_entry_of_a_directory_wins_and_parents_may_be_locked(store, tmp_path):
    members = [
        ("file", "late/inner/f", b"x", 0o644),       # parents made before their entries
        ("dir", "late", 0o700),
        ("dir", "late/inner", 0o500),
        ("dir", "late", 0o555, 7, 8),                # the same directory again: this one holds
        ("file", "many/0", b"0", 0o644),
    ] + [("hardlink", f"many/l{i}", "many/0") for i in range(2000)]
    path = layout_with_members(tmp_path, members)
    info = store.json("image", "import", path, "--name", "dirs")
    root = store.layer_root(info["layers"][0])
    st = os.stat(os.path.join(root, "late"))
    assert (stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid) == (0o555, 7, 8)
    assert stat.S_IMODE(os.stat(os.path.join(root, "late", "inner")).st_mode) == 0o500
    assert os.stat(os.path.join(root, "many", "l1999")).st_nlink == 2001


def layout_with_members(tmp_path, members):
    root = str(tmp_path / "layout")
    kit.oci_layout(root, [(kit.tar_bytes(members), "gzip")])
    return root
