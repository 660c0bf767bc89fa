import json
import os
import subprocess
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "fakes"))
import registry  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


@pytest.fixture(scope="session")
def images():
    """The shared test images (tests/images/make-images.sh), made when missing."""
    d = os.environ.get("HANGAR_TEST_IMAGES") or os.path.join(HERE, "..", "..", "build", "test-images")
    subprocess.run(["sh", os.path.join(HERE, "..", "images", "make-images.sh"), d, "busybox", "layered"],
                   check=True, timeout=600)
    return d


@pytest.fixture(scope="session", autouse=True)
def _stop_everything():
    yield
    registry.stop_all()


class Fetcher:
    def __init__(self, tmp):
        self.tmp = tmp
        self.home = tmp / "home"
        self.home.mkdir(exist_ok=True)

    def env(self, extra=None):
        e = {k: v for k, v in os.environ.items() if not k.startswith("HANGAR_") and k != "DOCKER_CONFIG"}
        e.update({"HOME": str(self.home), "HANGAR_STATE_DIR": str(self.tmp / "state")})
        e.update(extra or {})
        return e

    def run(self, ref, dest, env=None, timeout=120):
        p = subprocess.run([os.environ["REGISTRY_FETCH"], "fetch", ref, str(dest)], env=self.env(env),
                           capture_output=True, text=True, timeout=timeout)
        return p.returncode, p.stdout.strip(), p.stderr.strip()

    def ok(self, ref, dest, env=None):
        rc, out, err = self.run(ref, dest, env)
        assert rc == 0, err
        return out

    def fails(self, ref, dest, code, *words, env=None, timeout=120):
        rc, out, err = self.run(ref, dest, env, timeout)
        assert rc == 1, (out, err)
        assert err.startswith(f"error {code}:"), err
        for w in words:
            assert w in err, err
        return err

    def auth_file(self, host, user, password, form="auth"):
        import base64
        if form == "auth":
            entry = {"auth": base64.b64encode(f"{user}:{password}".encode()).decode()}
        else:
            entry = {"username": user, "password": password}
        p = self.tmp / "config.json"
        p.write_text(json.dumps({"auths": {host: entry}}))
        return str(p)


@pytest.fixture
def fetcher(tmp_path):
    return Fetcher(tmp_path)
