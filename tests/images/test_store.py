"""The store under crashes and concurrency: imports killed with SIGKILL at
several points, two imports of one image at once, an image a sandbox holds
(its use/ lock, taken here by a process of the test's own), and gc."""

import fcntl
import os
import signal
import subprocess
import sys
import time

import pytest

import imagekit as kit

BIG = 3 << 20  # past the 1 MiB steps between progress reports


@pytest.fixture
def three(tmp_path):
    """A layout of three layers, the middle one incompressible and large."""
    root = str(tmp_path / "layout")
    layers = [
        (kit.tar_bytes([("file", "one", b"1", 0o644)]), "gzip"),
        (kit.tar_bytes([("file", "big", os.urandom(BIG), 0o644)]), "gzip"),
        (kit.tar_bytes([("file", "three", b"3", 0o644)]), "zstd"),
    ]
    digest, _, _ = kit.oci_layout(root, layers)
    return root, digest, [kit.sha256(raw) for raw, _ in layers]


@pytest.mark.parametrize("layer,nbytes", [(0, 0), (1, 0), (1, 1 << 20), (2, 0), (3, 0)])
def test_an_import_killed_leaves_nothing_trusted(store, three, layer, nbytes):
    root, digest, diff_ids = three
    r = store.helper_run(root, "app", str(layer), str(nbytes))
    assert r.returncode == -signal.SIGKILL, (r.returncode, r.stderr)
    # Nothing names a layer; whatever is on disk is a tmp/ entry or a layer
    # without layer.json, or a whole layer nothing names.
    assert store.entries("images") == []
    # A later import works, and inspect finds it.
    info = store.json("image", "import", root, "--name", "app")
    assert info["digest"] == digest and info["layers"] == diff_ids
    # gc removes the dead import's leftovers and keeps the image.
    store.json("image", "gc")
    assert store.entries("tmp") == []
    assert store.layer_dirs() == sorted(d[7:] for d in diff_ids)
    assert store.json("image", "inspect", "app")["digest"] == digest


def test_a_kill_mid_layer_leaves_work_that_gc_removes(store, three):
    root, _, _ = three
    r = store.helper_run(root, "app", "1", str(1 << 20))
    assert r.returncode == -signal.SIGKILL
    assert store.entries("tmp"), "the killed import left its partial layer in tmp/"
    partial = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(os.path.join(store.dir, "tmp"))
                  for f in fs)
    assert partial > 0
    freed = store.json("image", "gc")["freed_bytes"]
    assert freed >= partial
    assert store.entries("tmp") == [] and store.entries("images") == []
    assert store.layer_dirs() == []  # complete layers nothing names go too


def test_an_incomplete_layer_is_replaced_not_used(store, three):
    root, digest, diff_ids = three
    # A layer directory without layer.json, as a maker killed after its rename leaves it.
    fake = os.path.join(store.dir, "layers", diff_ids[0][7:], "root")
    os.makedirs(fake)
    with open(os.path.join(fake, "planted"), "w") as f:
        f.write("not from the image")
    info = store.json("image", "import", root, "--name", "app")
    assert info["digest"] == digest
    assert os.listdir(store.layer_root(diff_ids[0])) == ["one"]


def test_two_imports_at_once_share_one_layer_each(store, three):
    root, digest, diff_ids = three
    procs = [store.popen_import(root, "app") for _ in range(2)]
    outs = [p.communicate(timeout=120) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, err
        assert out.decode().strip() == digest
    assert store.layer_dirs() == sorted(d[7:] for d in diff_ids)
    assert store.entries("tmp") == []
    assert store.entries("images") == [digest[7:] + ".json"]


HOLDER = """
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o600)
fcntl.flock(fd, fcntl.LOCK_SH)
print("held", flush=True)
sys.stdin.read()
"""


def hold_use_lock(store, digest):
    """A process that holds use/<hex>.lock LOCK_SH, as a sandbox of the image does."""
    path = os.path.join(store.dir, "use", digest[7:] + ".lock")
    p = subprocess.Popen([sys.executable, "-c", HOLDER, path], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert p.stdout.readline() == b"held\n"
    return p


def test_an_image_in_use_is_neither_removed_nor_collected(store, tmp_path):
    a = tmp_path / "a.tar"
    b = tmp_path / "b.tar"
    a.write_bytes(kit.tar_bytes([("file", "a", os.urandom(2 << 20), 0o644)]))
    b.write_bytes(kit.tar_bytes([("file", "b", os.urandom(2 << 20), 0o644)]))
    da = store.ok("image", "import", str(a), "--name", "a").stdout.decode().strip()
    db = store.ok("image", "import", str(b), "--name", "b").stdout.decode().strip()
    holder = hold_use_lock(store, da)
    try:
        assert store.json("image", "inspect", "a")["in_use"] is True
        r = store.run("image", "rm", "a", "--json")
        assert r.returncode == 1
        assert b'"error":"busy"' in r.stdout and b"used by a sandbox" in r.stdout
        # Over a 1 MiB cap, gc removes what it may (b, the older unused one
        # would go first; a is older but in use) and keeps a.
        store.json("image", "gc", "--max-mb", "1")
        names = [i["names"] for i in store.json("image", "list")]
        assert names == [["docker.io/library/a:latest"]]
        assert db[7:] + ".json" not in store.entries("images")
    finally:
        holder.stdin.close()
        holder.wait(timeout=30)
    assert store.json("image", "inspect", "a")["in_use"] is False
    store.ok("image", "rm", da)
    assert store.entries("images") == [] and store.layer_dirs() == []


def test_gc_keeps_the_newest_under_the_cap(store, tmp_path):
    digests = []
    for i in range(3):
        p = tmp_path / f"{i}.tar"
        p.write_bytes(kit.tar_bytes([("file", "f", os.urandom(1 << 20), 0o644)]))
        digests.append(store.ok("image", "import", str(p), "--name", f"img:{i}").stdout.decode().strip())
    freed = store.json("image", "gc", "--max-mb", "2")["freed_bytes"]
    assert freed >= 1 << 20
    left = [i["digest"] for i in store.json("image", "list")]
    assert left == [digests[2], digests[1]]


def test_gc_and_rm_leave_what_an_import_is_making(store, three, tmp_path):
    root, digest, diff_ids = three
    # Another image shares the first layer, so rm of it would take the layer too.
    other = str(tmp_path / "other")
    first = [(kit.tar_bytes([("file", "one", b"1", 0o644)]), "gzip")]
    kit.oci_layout(other, first)
    store.ok("image", "import", other, "--name", "other")
    p = subprocess.Popen([store.helper, root, "app", "hold", "2"], env=store.env, stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert p.stderr.readline() == b"holding\n"
        # Two layers are complete and named by no record yet; one more import
        # of the same image waits on them, gc and rm must leave them.
        store.ok("image", "rm", "other")
        store.json("image", "gc", "--max-mb", "1")
        assert set(d[7:] for d in diff_ids[:2]) <= set(store.layer_dirs())
    except BaseException:
        p.kill()
        raise
    out, err = p.communicate(timeout=120)  # closes its stdin: the import goes on
    assert p.returncode == 0, err
    assert out.decode().strip() == digest
    info = store.json("image", "inspect", "app")
    for d in info["layers"]:
        assert os.path.exists(os.path.join(store.dir, "layers", d[7:], "layer.json"))
