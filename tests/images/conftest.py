"""Fixtures for the image store suite: the real hangar binary and the
library's import (through import-helper) on a store of each test's own.

Every test gets a fresh directory holding the store (HANGAR_IMAGE_DIR), the
state directory and a sentinel directory beside them that no import may
touch, so "nothing written outside the store" is checked on every test.
"""

import json
import os
import subprocess
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))

TIMEOUT = 120


def binary(var):
    path = os.environ.get(var)
    if not path:
        pytest.skip(f"{var} is not set (run through meson test)")
    return path


class Store:
    def __init__(self, root):
        self.root = root
        self.dir = os.path.join(root, "store")
        self.outside = os.path.join(root, "outside")
        os.makedirs(self.outside)
        os.makedirs(self.dir, mode=0o700)
        self.cli = binary("HANGAR_CLI")
        self.helper = binary("HANGAR_IMPORT_HELPER")
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("HANGAR_")}
        self.env["HANGAR_STATE_DIR"] = os.path.join(root, "state")
        self.env["HANGAR_IMAGE_DIR"] = self.dir

    def run(self, *args, env=None, timeout=TIMEOUT):
        e = dict(self.env, **(env or {}))
        return subprocess.run([self.cli, *args], env=e, capture_output=True, timeout=timeout)

    def ok(self, *args, **kw):
        r = self.run(*args, **kw)
        assert r.returncode == 0, (args, r.stdout, r.stderr)
        return r

    def json(self, *args, **kw):
        return json.loads(self.ok(*args, "--json", **kw).stdout)

    def fails(self, *args, **kw):
        r = self.run(*args, **kw)
        assert r.returncode == 1, (args, r.returncode, r.stdout, r.stderr)
        return r.stderr.decode()

    def helper_run(self, *args, env=None):
        e = dict(self.env, **(env or {}))
        return subprocess.run([self.helper, *args], env=e, capture_output=True, timeout=TIMEOUT)

    def popen_import(self, path, name=""):
        return subprocess.Popen([self.helper, path, name], env=self.env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE)

    def entries(self, sub):
        p = os.path.join(self.dir, sub)
        return sorted(os.listdir(p)) if os.path.isdir(p) else []

    def layer_dirs(self):
        return [e for e in self.entries("layers") if not e.endswith(".lock")]

    def layer_root(self, diff_id):
        return os.path.join(self.dir, "layers", diff_id.split(":", 1)[1], "root")

    def assert_untouched(self):
        """Nothing reached the sentinel directory, and the store holds nothing half-made."""
        assert os.listdir(self.outside) == []
        assert self.entries("tmp") == []
        for d in self.layer_dirs():
            assert os.path.exists(os.path.join(self.dir, "layers", d, "layer.json")), d


@pytest.fixture
def store(tmp_path):
    s = Store(str(tmp_path))
    yield s
    s.assert_untouched()
