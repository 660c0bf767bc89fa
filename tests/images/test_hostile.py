"""Hostile images: each refused naming the problem, nothing written outside
the store (the fixture's sentinel directory stays empty), and nothing left
in layers/, images/ or tmp/."""

import json
import os

import pytest

import imagekit as kit


def refused(store, path, *expect, name="evil", env=None):
    msg = store.fails("image", "import", str(path), "--name", name, env=env)
    for e in expect:
        assert e in msg, msg
    assert store.entries("images") == []
    assert store.layer_dirs() == []
    assert [e for e in store.entries("layers")] == []  # no lock file either
    assert store.entries("tmp") == []
    return msg


def layout_with(tmp_path, members, how="gzip"):
    root = str(tmp_path / "layout")
    kit.oci_layout(root, [(kit.tar_bytes(members), how)])
    return root


# Unpacked into IMAGE_DIR/tmp/<maker>/root: four levels up is the sentinel directory.
@pytest.mark.parametrize("name", ["../x", "a/../../x", "/abs", "./../x", "../../../../outside/x",
                                  "a/b/../../../../../../outside/x", "/%s/x"])
def test_paths_that_leave_the_layer(store, tmp_path, name):
    name = name.replace("%s", store.outside.lstrip("/"))
    path = layout_with(tmp_path, [("file", name, b"x", 0o644)])
    msg = refused(store, path, f'member "{name}"')
    assert "absolute" in msg or ".." in msg
    assert not os.path.exists(os.path.join(store.root, "x"))


def test_a_member_through_an_earlier_symlink(store, tmp_path):
    path = layout_with(tmp_path, [("symlink", "d", store.outside), ("file", "d/f", b"x", 0o644)])
    refused(store, path, 'member "d/f"', "symlink")


def test_a_member_through_a_relative_symlink(store, tmp_path):
    path = layout_with(tmp_path, [("dir", "a", 0o755), ("symlink", "a/up", "../.."), ("file", "a/up/f", b"x", 0o644)])
    refused(store, path, 'member "a/up/f"', "symlink")


def test_a_device_node(store, tmp_path):
    path = layout_with(tmp_path, [("chr", "dev-null", 1, 3)])
    refused(store, path, 'member "dev-null"', "device node")


@pytest.mark.parametrize("target", ["/etc/passwd", "../../../etc/passwd", "never-written"])
def test_hard_links_out_of_the_layer(store, tmp_path, target):
    path = layout_with(tmp_path, [("file", "ok", b"x", 0o644), ("hardlink", "link", target)])
    refused(store, path, 'member "link"', "hard link")


def test_a_blob_that_does_not_match_its_digest(store, tmp_path):
    root = str(tmp_path / "layout")
    _, descs, _ = kit.oci_layout(root, [(kit.tar_bytes([("file", "a", b"a", 0o644)]), "gzip")])
    blob = os.path.join(root, "blobs", "sha256", descs[0]["digest"][7:])
    with open(blob, "r+b") as f:
        data = bytearray(f.read())
        data[-5] ^= 0xFF
        f.seek(0)
        f.write(data)
    refused(store, root, "blob " + descs[0]["digest"], "does not match its digest")


def test_a_diff_id_that_does_not_match(store, tmp_path):
    root = str(tmp_path / "layout")
    other = kit.sha256(b"another layer")
    kit.oci_layout(root, [(kit.tar_bytes([("file", "a", b"a", 0o644)]), "zstd")], diff_ids=[other])
    refused(store, root, other, "diff_id")


def test_a_layer_past_the_cache_cap(store, tmp_path):
    path = layout_with(tmp_path, [("file", "small", b"s", 0o644), ("file", "big", os.urandom(3 << 20), 0o644)])
    refused(store, path, 'member "big"', "HANGAR_IMAGE_CACHE_MB", env={"HANGAR_IMAGE_CACHE_MB": "2"})


def test_a_manifest_naming_a_missing_blob(store, tmp_path):
    root = str(tmp_path / "layout")
    _, descs, _ = kit.oci_layout(root, [(kit.tar_bytes([("file", "a", b"a", 0o644)]), "gzip")])
    os.unlink(os.path.join(root, "blobs", "sha256", descs[0]["digest"][7:]))
    refused(store, root, "blob " + descs[0]["digest"], "missing")


def test_a_manifest_with_a_duplicate_member(store, tmp_path):
    root = str(tmp_path / "layout")
    layer = kit.tar_bytes([("file", "a", b"a", 0o644)])
    _, descs, cfg = kit.oci_layout(root, [(layer, None)])
    cfg_size = os.path.getsize(os.path.join(root, "blobs", "sha256", cfg[7:]))
    text = ('{"schemaVersion":2,"config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"%s",'
            '"size":%d},"layers":[],"layers":%s}' % (cfg, cfg_size, json.dumps(descs))).encode()
    kit.oci_layout(root, [(layer, None)], manifest_text=text)
    refused(store, root, "duplicate member", "layers")


def test_malformed_config_json(store, tmp_path):
    root = str(tmp_path / "layout")
    kit.oci_layout(root, [(kit.tar_bytes([("file", "a", b"a", 0o644)]), None)], config_json=b'{"os":"linux",')
    refused(store, root, "config", "not strict JSON")


def test_a_media_type_that_disagrees_with_the_content(store, tmp_path):
    root = str(tmp_path / "layout")
    kit.oci_layout(root, [(kit.tar_bytes([("file", "a", b"a", 0o644)]), "gzip")],
                   media_types={0: kit.LAYER_TYPES["zstd"]})
    refused(store, root, "is gzip", "says zstd")


def test_a_socket_like_kind_and_a_nameless_whiteout(store, tmp_path):
    path = layout_with(tmp_path, [("file", "d/.wh.", b"", 0o644)])
    refused(store, path, 'member "d/.wh."', "whiteout of nothing")


def test_a_docker_archive_with_a_traversing_member(store, tmp_path):
    import io
    import tarfile
    path = tmp_path / "saved.tar"
    with tarfile.open(path, "w") as t:
        ti = tarfile.TarInfo("../escape")
        ti.size = 1
        t.addfile(ti, io.BytesIO(b"x"))
        ti = tarfile.TarInfo("manifest.json")
        ti.size = 2
        t.addfile(ti, io.BytesIO(b"[]"))
    refused(store, path, 'member "../escape"')
    assert not os.path.exists(os.path.join(store.root, "escape"))


def test_a_fifo_planted_as_a_blob_does_not_hang_the_import(store, tmp_path):
    root = str(tmp_path / "layout")
    _, descs, _ = kit.oci_layout(root, [(kit.tar_bytes([("file", "a", b"a", 0o644)]), "gzip")])
    blob = os.path.join(root, "blobs", "sha256", descs[0]["digest"][7:])
    os.unlink(blob)
    os.mkfifo(blob)
    refused(store, root, descs[0]["digest"][7:], "not a regular file")


def test_a_directory_replaced_by_a_later_member_is_fine(store, tmp_path):
    path = layout_with(tmp_path, [("dir", "d", 0o755), ("file", "d/x", b"x", 0o644), ("file", "d", b"now a file", 0o600)])
    info = store.json("image", "import", path, "--name", "ok")
    with open(os.path.join(store.layer_root(info["layers"][0]), "d")) as f:
        assert f.read() == "now a file"


def test_a_name_over_4096_bytes(store, tmp_path):
    name = "d/" + "n" * 4100
    path = layout_with(tmp_path, [("file", name, b"x", 0o644)])
    refused(store, path, "longer than 4096")


def test_a_sparse_file(store, tmp_path):
    import io
    import tarfile
    # A pax 1.0 sparse member: its data opens with the map (one 5-byte region at 0).
    sparse_map = b"1\n0\n5\n".ljust(512, b"\0") + b"hello"
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as t:
        ti = tarfile.TarInfo("GNUSparseFile.0/s")
        ti.size = len(sparse_map)
        ti.pax_headers = {"GNU.sparse.major": "1", "GNU.sparse.minor": "0", "GNU.sparse.name": "s",
                          "GNU.sparse.realsize": "100"}
        t.addfile(ti, io.BytesIO(sparse_map))
    root = str(tmp_path / "layout")
    kit.oci_layout(root, [(buf.getvalue(), "gzip")])
    refused(store, root, 'member "s"', "sparse")


def test_a_hostile_name_is_quoted_on_one_line(store, tmp_path):
    name = "../\n\x1b[31mred\xff" + "x" * 300
    buf = kit.tar_bytes([("file", name.encode("utf-8", "surrogateescape").decode("latin-1"), b"x", 0o644)],
                        fmt=__import__("tarfile").GNU_FORMAT)
    root = str(tmp_path / "layout")
    kit.oci_layout(root, [(buf, None)])
    refused(store, root, "..", "...")
    # The library's own message, as the helper prints it unescaped.
    r = store.helper_run(root, "evil")
    msg = r.stderr.decode("utf-8")  # valid UTF-8, or this raises
    assert r.returncode == 1 and msg.startswith("refused: ")
    assert msg.count("\n") == 1 and "\x1b" not in msg and "??[31mred" in msg
    assert len(msg) < 800


def test_device_nodes_under_dev_are_left_out_not_made(store, tmp_path):
    # A bootstrap tool's root carries /dev's nodes: the sandbox's /dev is its own, so
    # they are dropped; a node anywhere else still refuses the layer (above).
    path = layout_with(tmp_path, [("dir", "dev", 0o755), ("chr", "dev/null", 1, 3), ("chr", "dev/console", 5, 1),
                                  ("file", "etc-file", b"x", 0o644)])
    info = store.json("image", "import", path, "--name", "devs")
    root = store.layer_root(info["layers"][0])
    assert os.path.isdir(os.path.join(root, "dev")) and os.listdir(os.path.join(root, "dev")) == []
    assert os.path.isfile(os.path.join(root, "etc-file"))
