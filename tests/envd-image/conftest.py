"""hangar-envd in a root that is not the host's: a static busybox root with
no libc at all, and a musl root.

Each daemon runs in bubblewrap with the root directory as / and envd's own
runtime under a read-only /run/hangar, as hangar-jail's add_envd makes it for
an image sandbox: the host's loader (hangar-envd's program interpreter) and
every library that loader resolves for it, each under the name asked for, the
image's /etc/ld.so.preload hidden, and envd started as
`LOADER --library-path /run/hangar/lib --inhibit-cache --argv0 hangar-envd
/run/hangar/hangar-envd -loader LOADER ...`. It runs as root of the host (the
test's), without network namespace, listening on a loopback port.

Roots are made once into $HANGAR_TEST_IMAGES (default build/test-images) and
copied for every test, which may then change its copy.
"""

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "envd"))

from envdwire import Client, read_ready  # noqa: E402

READY_TIMEOUT = 10
BUSYBOX = "/bin/busybox"
MUSL_GCC = "/usr/bin/musl-gcc"
MUSL_LOADER = "/lib/x86_64-linux-musl/libc.so"
# What the musl root's test program does: print its own mappings and environment.
MAPS_C = r"""
#include <stdio.h>
extern char **environ;
int main(void)
{
	FILE *f = fopen("/proc/self/maps", "r");
	int c;

	while (f && (c = fgetc(f)) != EOF)
		putchar(c);
	for (char **e = environ; *e; e++)
		printf("ENV %s\n", *e);
	return 0;
}
"""


def envd_binary():
    path = os.environ.get("HANGAR_ENVD")
    if not path:
        pytest.skip("HANGAR_ENVD is not set (run through meson test)")
    return path


def images_dir():
    d = os.environ.get("HANGAR_TEST_IMAGES") or os.environ.get("HANGAR_TEST_IMAGES_DEFAULT")
    if not d:
        d = os.path.join(tempfile.gettempdir(), "hangar-test-images")
    os.makedirs(d, exist_ok=True)
    return d


def program_interpreter(path):
    """PT_INTERP of an ELF program, read with readelf."""
    out = subprocess.run(["readelf", "-lW", path], capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        if "Requesting program interpreter:" in line:
            return line.split(":", 1)[1].strip().rstrip("]").strip()
    raise AssertionError(f"{path} names no program interpreter")


def worker_of(envd):
    """hangar-envd's checkpoint worker, beside it."""
    return os.path.join(os.path.dirname(envd), "hangar-envd-archive")


def envd_runtime(envd):
    """(loader, [(name, host path)]): what add_envd binds under /run/hangar/lib, for envd and its worker."""
    loader = program_interpreter(envd)
    libs = {}
    for program in [envd] + [worker_of(envd)] * os.path.exists(worker_of(envd)):
        out = subprocess.run([loader, "--list", program], capture_output=True, text=True, env={},
                             check=True).stdout
        for line in out.splitlines():
            if " => " not in line:
                continue
            name, rest = line.strip().split(" => ", 1)
            path = rest.split(" (", 1)[0]
            assert path.startswith("/"), f"the host's loader cannot find {name}"
            libs.setdefault(name, path)
    return loader, list(libs.items())


def bwrap_argv(root, envd, extra):
    loader, libs = envd_runtime(envd)
    inside = "/run/hangar/lib/" + os.path.basename(loader)
    argv = ["bwrap", "--bind", root, "/", "--proc", "/proc", "--dev", "/dev",
            "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--die-with-parent", "--new-session",
            "--perms", "0700", "--size", "65536", "--tmpfs", "/run/hangar",
            "--ro-bind", envd, "/run/hangar/hangar-envd",
            "--ro-bind-try", worker_of(envd), "/run/hangar/hangar-envd-archive",
            "--perms", "0755", "--dir", "/run/hangar/lib",
            "--ro-bind", loader, inside]
    for name, path in libs:
        argv += ["--ro-bind", path, "/run/hangar/lib/" + name]
    argv += ["--ro-bind", "/dev/null", "/etc/ld.so.preload", "--remount-ro", "/run/hangar",
             "--chdir", "/workspace", "--clearenv",
             "--setenv", "PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
             inside, "--library-path", "/run/hangar/lib", "--inhibit-cache", "--argv0", "hangar-envd",
             "/run/hangar/hangar-envd", "-loader", inside]
    return argv + extra


def base_tree(root, user_shell="/bin/sh", root_shell="/bin/bash"):
    """The directories and users every image root has (the jail writes users and root when missing)."""
    for d in ("bin", "etc", "tmp", "workspace", "home/user", "root", "proc", "dev", "run", "lib"):
        os.makedirs(os.path.join(root, d), exist_ok=True)
    with open(os.path.join(root, "etc/passwd"), "w") as f:
        f.write(f"root:x:0:0:root:/root:{root_shell}\nuser:x:1000:1000:user:/home/user:{user_shell}\n")
    with open(os.path.join(root, "etc/group"), "w") as f:
        f.write("root:x:0:\nuser:x:1000:\n")
    os.chmod(os.path.join(root, "tmp"), 0o1777)
    for d in ("workspace", "home/user"):
        os.chown(os.path.join(root, d), 1000, 1000)


def busybox_applets(root, skip=("timeout", "bash")):
    """busybox-static as /bin/busybox with a link for each applet, but no timeout and no bash."""
    shutil.copy2(BUSYBOX, os.path.join(root, "bin/busybox"))
    out = subprocess.run([BUSYBOX, "--list"], capture_output=True, text=True, check=True).stdout
    for name in out.split():
        if name in skip or name == "busybox":
            continue
        link = os.path.join(root, "bin", name)
        if not os.path.lexists(link):
            os.symlink("busybox", link)


def make_busybox_root(dest):
    base_tree(dest, user_shell="/bin/ash")
    busybox_applets(dest)


def make_musl_root(dest):
    base_tree(dest)
    busybox_applets(dest)
    shutil.copy2(MUSL_LOADER, os.path.join(dest, "lib/ld-musl-x86_64.so.1"))
    src = os.path.join(dest, "maps.c")
    with open(src, "w") as f:
        f.write(MAPS_C)
    subprocess.run([MUSL_GCC, "-O1", "-o", os.path.join(dest, "bin/maps"), src], check=True)
    os.unlink(src)


ROOTS = {
    "busybox": (lambda: os.path.exists(BUSYBOX), "busybox-static is not installed", make_busybox_root),
    "musl": (lambda: os.path.exists(BUSYBOX) and os.path.exists(MUSL_GCC) and os.path.exists(MUSL_LOADER),
             "busybox-static and musl-tools are not installed", make_musl_root),
}


def cached_root(kind):
    """The root of that kind, made once into the images directory."""
    present, why, make = ROOTS[kind]
    if not present():
        pytest.skip(why)
    d = os.path.join(images_dir(), f"envd-{kind}")
    if not os.path.exists(os.path.join(d, ".complete")):
        shutil.rmtree(d, ignore_errors=True)
        tmp = d + f".tmp{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        os.makedirs(tmp)
        make(tmp)
        open(os.path.join(tmp, ".complete"), "w").close()
        os.rename(tmp, d)
    return d


class ImageEnvd:
    def __init__(self, root, extra=()):
        self.root = root
        self.log = tempfile.TemporaryFile()
        rfd, wfd = os.pipe()
        try:
            self.proc = subprocess.Popen(
                bwrap_argv(root, envd_binary(),
                           ["-addr", "127.0.0.1", "-port", "0", "-ready-fd", str(wfd), "-user", "user",
                            "-workdir", "/workspace"] + list(extra)),
                pass_fds=(wfd,), stdin=subprocess.DEVNULL, stdout=self.log, stderr=self.log,
                env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")}, start_new_session=True)
        finally:
            os.close(wfd)
        try:
            self.port = self._read_ready(rfd)
        finally:
            os.close(rfd)
        self.client = Client(self.port)

    def _read_ready(self, fd):
        try:
            return read_ready(fd, self.proc, READY_TIMEOUT)
        except AssertionError as e:
            self.kill()
            pytest.fail(f"{e}: {self.output()}")

    def output(self):
        self.log.seek(0)
        return self.log.read().decode(errors="replace")[-4000:]

    def daemon_pid(self):
        """The host pid of the daemon: bwrap's descendant running as hangar-envd."""
        todo = [self.proc.pid]
        while todo:
            pid = todo.pop()
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    argv = f.read().split(b"\0")
                with open(f"/proc/{pid}/task/{pid}/children") as f:
                    todo += [int(c) for c in f.read().split()]
            except FileNotFoundError:
                continue
            # The loader's command line: hangar-envd is its program, -loader among the daemon's flags.
            if argv[0].startswith(b"/run/hangar/lib/") and b"-loader" in argv:
                return pid
        raise AssertionError("no hangar-envd process under bwrap")

    def kill(self):
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=5)


@pytest.fixture
def image(tmp_path):
    """Factory: image(kind, prepare=None) copies the cached root, lets prepare(root) change it, starts envd."""
    if os.geteuid() != 0:
        pytest.skip("runs bubblewrap as root")
    if not shutil.which("bwrap"):
        pytest.skip("bubblewrap is not installed")
    daemons = []

    def start(kind, prepare=None):
        root = str(tmp_path / f"root-{len(daemons)}")
        shutil.copytree(cached_root(kind), root, symlinks=True)
        for d in ("workspace", "home/user"):
            os.chown(os.path.join(root, d), 1000, 1000)
        if prepare:
            prepare(root)
        d = ImageEnvd(root)
        daemons.append(d)
        return d

    yield start
    problems = []
    for d in daemons:
        if d.proc.poll() is not None:
            problems.append(f"hangar-envd died during the test ({d.proc.returncode}): {d.output()}")
        d.kill()
    if problems:
        pytest.fail("\n".join(problems))
