"""meson install puts a package that `import hangar` finds, and that works."""

import os
import subprocess
import sys

import pytest


def test_installed_package_imports_and_runs(tmp_path):
    meson, build = os.environ.get("MESON"), os.environ.get("HANGAR_BUILD_ROOT")
    if not meson or not build:
        pytest.fail("MESON and HANGAR_BUILD_ROOT must be set (run through meson test)")
    dest = tmp_path / "dest"
    r = subprocess.run([meson, "install", "-C", build, "--no-rebuild", "--quiet", "--destdir", str(dest)],
                       capture_output=True, timeout=300)
    assert r.returncode == 0, r.stderr.decode()
    inits = [os.path.join(d, "__init__.py") for d, _, files in os.walk(dest)
             if os.path.basename(d) == "hangar" and "__init__.py" in files]
    assert len(inits) == 1, inits
    pkg = os.path.dirname(inits[0])
    assert any(f.startswith("_hangar.") and f.endswith(".so") for f in os.listdir(pkg))
    assert {"py.typed", "_hangar.pyi", "sandbox.py"} <= set(os.listdir(pkg))
    libs = {os.path.dirname(os.path.join(d, f)) for d, _, files in os.walk(dest) for f in files
            if f.startswith("libhangar.so")}
    env = dict(os.environ, PYTHONPATH=os.path.dirname(pkg), LD_LIBRARY_PATH=":".join(sorted(libs)))
    if os.environ.get("HANGAR_PY_PRELOAD"):
        env["LD_PRELOAD"] = os.environ["HANGAR_PY_PRELOAD"]
    code = ("import hangar, sys\n"
            "print(hangar.__file__)\n"
            "ctx = hangar.Context()\n"
            "with hangar.Sandbox.create(ctx) as sb:\n"
            "    sys.stdout.write(sb.exec('echo installed').stdout.text)\n")
    r = subprocess.run([sys.executable, "-c", code], env=env, cwd=str(tmp_path), capture_output=True, timeout=120)
    assert r.returncode == 0, r.stderr.decode()
    lines = r.stdout.decode().splitlines()
    assert lines[0] == inits[0] and lines[1] == "installed"
