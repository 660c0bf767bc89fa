"""Start the fake E2B control plane (fake-e2b, built in this directory) from a Python suite.

    from fakee2b import FakeE2B
    with FakeE2B("cloud", api_key="k") as fake:
        env = fake.settings()          # the HANGAR_E2B_* settings that reach it

meson passes the binaries in FAKE_E2B and HANGAR_ENVD_PATH; without them the
caller decides (skip() raises pytest's skip). The fake reports its ports on a
pipe once it listens; start-up waits for that line with a deadline, never a
sleep.
"""

import os
import select
import signal
import subprocess
import time


class FakeE2BMissing(Exception):
    """FAKE_E2B or HANGAR_ENVD_PATH is not set: the suite runs outside meson test."""


class FakeE2B:
    def __init__(self, flavour="cloud", api_key=None, extra=(), log=None, deadline=20.0):
        fake, envd = os.environ.get("FAKE_E2B"), os.environ.get("HANGAR_ENVD_PATH") or os.environ.get("HANGAR_ENVD")
        if not fake or not os.access(fake, os.X_OK) or not envd:
            raise FakeE2BMissing("FAKE_E2B and HANGAR_ENVD_PATH must name the built fake and envd")
        self.flavour, self.api_key = flavour, api_key
        args = [fake, "--flavour", flavour, "--envd", envd]
        if api_key:
            args += ["--api-key", api_key]
        r, w = os.pipe()
        out = {"stdout": log, "stderr": log} if log else {}
        self.proc = subprocess.Popen([*args, *extra, "--ready-fd", str(w)], pass_fds=(w,),
                                     stdin=subprocess.DEVNULL, **out)
        os.close(w)
        line = b""
        end = time.monotonic() + deadline
        try:
            with os.fdopen(r, "rb", buffering=0) as f:
                while not line.endswith(b"\n"):
                    ready, _, _ = select.select([f], [], [], max(0.0, end - time.monotonic()))
                    if not ready:
                        raise RuntimeError("fake-e2b did not get ready")
                    chunk = f.read(64)
                    if not chunk:
                        raise RuntimeError("fake-e2b exited early")
                    line += chunk
            word, api, edge = line.decode().split()
            if word != "ready":
                raise RuntimeError(f"fake-e2b said {line!r}")
        except BaseException:
            self.proc.kill()
            self.proc.wait()
            raise
        self.api_port, self.edge_port = int(api), int(edge)
        self.api_url = f"http://127.0.0.1:{self.api_port}"
        self.edge_url = f"http://127.0.0.1:{self.edge_port}"

    def settings(self):
        """The settings that point the e2b provider at this fake."""
        s = {"HANGAR_E2B_FLAVOR": self.flavour, "HANGAR_E2B_API_URL": self.api_url,
             "HANGAR_E2B_SANDBOX_URL": self.edge_url}
        if self.api_key:
            s["HANGAR_E2B_API_KEY"] = self.api_key
        return s

    def close(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=30)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
