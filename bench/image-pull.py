#!/usr/bin/env python3
"""image-pull: registry_fetch against `skopeo copy` pulling one ~100 MB image.

The image is Debian bookworm (minbase, from tests/images/make-images.sh)
plus a layer of random data (incompressible), pushed to Debian's
docker-registry on loopback over plain http. Each round pulls it into a
fresh OCI layout directory twice, once with registry-fetch (the library's
registry_fetch) and once with `skopeo copy docker://... oci:DIR`, in
alternating order; the table gives each tool's times and the ratio of the
medians (goal: registry_fetch <= 1.2x skopeo).

Usage: image-pull.py REGISTRY_FETCH MAKE_IMAGES [--rounds N] [--random-mib N] [--images DIR]
Needs root, docker-registry, skopeo, umoci, mmdebstrap (and a Debian mirror
the first time, to build the Debian image).
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "registry"))
import registry  # noqa: E402


def make_image(images, work, random_mib):
    """debian + a layer of random_mib MiB of random bytes, as an OCI layout in work/big."""
    big = os.path.join(work, "big")
    shutil.copytree(os.path.join(images, "debian"), big, symlinks=True)
    root = os.path.join(work, "rnd")
    os.makedirs(os.path.join(root, "opt"))
    with open(os.path.join(root, "opt", "random.bin"), "wb") as f:
        for _ in range(random_mib):
            f.write(os.urandom(1 << 20))
    tar = os.path.join(work, "rnd.tar")
    subprocess.run(["tar", "--sort=name", "--owner=0", "--group=0", "-C", root, "-cf", tar, "."], check=True)
    subprocess.run(["umoci", "raw", "add-layer", "--image", f"{big}:latest", tar], check=True)
    shutil.rmtree(root)
    os.unlink(tar)
    return big


def du(d):
    return sum(os.path.getsize(os.path.join(p, n)) for p, _, ns in os.walk(d) for n in ns)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("registry_fetch")
    ap.add_argument("make_images")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--random-mib", type=int, default=36)
    ap.add_argument("--images", default=os.environ.get("HANGAR_TEST_IMAGES", "build/test-images"))
    a = ap.parse_args()
    for tool in ("docker-registry", "skopeo", "umoci", "mmdebstrap"):
        if not shutil.which(tool):
            print(f"image-pull: {tool} is not installed; skipping")
            return 77
    subprocess.run(["sh", a.make_images, a.images, "debian"], check=True)
    work = tempfile.mkdtemp(prefix="image-pull-")
    env = {k: v for k, v in os.environ.items() if not k.startswith("HANGAR_")}
    env.update({"HOME": work, "HANGAR_STATE_DIR": os.path.join(work, "state")})
    try:
        big = make_image(a.images, work, a.random_mib)
        reg = registry.Registry(os.path.join(work, "registry"))
        ref = f"{reg.host}/bench/big:latest"
        registry.push(big, ref)
        times = {"registry_fetch": [], "skopeo copy": []}
        size = 0

        def lib(dest):
            subprocess.run([a.registry_fetch, "fetch", ref, dest], check=True, env=env,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

        def skopeo(dest):
            subprocess.run(["skopeo", "copy", "--quiet", "--insecure-policy", "--src-tls-verify=false",
                            f"docker://{ref}", f"oci:{dest}:latest"], check=True, env=env)

        runs = [("registry_fetch", lib), ("skopeo copy", skopeo)]
        for r in range(a.rounds + 1):  # the first round warms the page cache and is dropped
            for name, fn in (runs if r % 2 == 0 else runs[::-1]):
                dest = os.path.join(work, f"out-{r}-{name[:6]}")
                t0 = time.monotonic()
                fn(dest)
                dt = time.monotonic() - t0
                size = du(os.path.join(dest, "blobs"))
                if r > 0:
                    times[name].append(dt)
                shutil.rmtree(dest)
        print(f"image-pull: {size / 1e6:.1f} MB of blobs from docker-registry on loopback, "
              f"{a.rounds} rounds (after one warm-up)")
        print(f"{'tool':<16}{'median s':>10}{'min s':>9}{'max s':>9}{'MB/s':>9}")
        for name, ts in times.items():
            m = statistics.median(ts)
            print(f"{name:<16}{m:>10.3f}{min(ts):>9.3f}{max(ts):>9.3f}{size / 1e6 / m:>9.1f}")
        ratio = statistics.median(times["registry_fetch"]) / statistics.median(times["skopeo copy"])
        print(f"ratio registry_fetch / skopeo copy: {ratio:.2f}x (goal <= 1.2x)")
        return 0
    finally:
        registry.stop_all()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
