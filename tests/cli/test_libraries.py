"""libcurl, libpq and libarchive are loaded when first used (util/dl.h):
creating, listing and killing a local sandbox maps none of them, the first
HTTP request (a command, to envd), PostgreSQL store or image archive loads
its own, and a library that cannot be loaded is an error that names it, not
a crash."""

import glob
import os
import subprocess
import tempfile

import pytest

LAZY = ("libcurl.so.4", "libpq.so.5", "libarchive.so.13")


def loaded_by_cli(hangar, *args, env=None):
    """(completed process, the libraries the hangar process itself loaded, as
    the dynamic loader tells: {soname: how}) for one run of hangar."""
    with tempfile.TemporaryDirectory(prefix="hangar-ld-") as d:
        e = dict(hangar.env, LD_DEBUG="files", LD_DEBUG_OUTPUT=os.path.join(d, "ld"))
        if env:
            e.update(env)
        p = subprocess.Popen(hangar.argv(*args), env=e, stdin=subprocess.DEVNULL,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        out, err = p.communicate(timeout=120)
        # One file per process, named by its pid: the jail and the sandbox's own are not hangar's.
        with open(os.path.join(d, f"ld.{p.pid}")) as f:
            text = f.read()
        assert glob.glob(os.path.join(d, "ld.*")), "LD_DEBUG_OUTPUT wrote nothing"
    seen = {}
    for line in text.splitlines():
        # "   1234:	file=libcurl.so.4 [0];  dynamically loaded by ..." / "needed by ..."
        if "file=" in line and ("needed by" in line or "dynamically loaded by" in line):
            name = line.split("file=", 1)[1].split()[0]
            seen[name] = "dlopen" if "dynamically loaded" in line else "needed"
    return subprocess.CompletedProcess(p.args, p.returncode, out, err), seen


def test_a_local_sandbox_maps_none_of_them(hangar):
    r, seen = loaded_by_cli(hangar, "sandbox", "create")
    assert r.returncode == 0, r.stderr
    sid = r.stdout.decode().strip()
    try:
        # The control: the loader's report is read, and lists what hangar does link.
        assert seen.get("libhangar.so.1") == "needed", seen
        assert not [n for n in LAZY if n in seen], seen
        for args in (("sandbox", "list"), ("sandbox", "info", sid)):
            r, seen = loaded_by_cli(hangar, *args)
            assert r.returncode == 0 and not [n for n in LAZY if n in seen], (args, seen, r.stderr)
        # A command speaks HTTP to the sandbox's envd, through libcurl: loaded then, not linked.
        r, seen = loaded_by_cli(hangar, "sandbox", "exec", sid, "--", "echo", "local")
        assert r.returncode == 0 and r.stdout == b"local\n", r.stderr
        assert seen.get("libcurl.so.4") == "dlopen", seen
        assert "libpq.so.5" not in seen and "libarchive.so.13" not in seen
    finally:
        hangar("sandbox", "kill", sid)


def test_each_is_loaded_by_its_first_use(hangar):
    # PostgreSQL: the store's URL is checked with libpq, so `config check` loads it.
    r, seen = loaded_by_cli(hangar, "config", "check",
                            env={"HANGAR_STORE": "postgresql://nobody@127.0.0.1:1/none"})
    assert seen.get("libpq.so.5") == "dlopen", (seen, r.stderr)
    assert "libcurl.so.4" not in seen and "libarchive.so.13" not in seen
    # An image archive (here not a tar) is read with libarchive.
    with tempfile.NamedTemporaryFile(suffix=".tar") as f:
        f.write(b"not a tar archive\n" * 64)
        f.flush()
        r, seen = loaded_by_cli(hangar, "image", "import", f.name)
    assert r.returncode != 0 and b"not a tar archive" in r.stderr, r.stderr
    assert seen.get("libarchive.so.13") == "dlopen", seen
    assert "libcurl.so.4" not in seen


def library_path(soname):
    out = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        # "	libcurl.so.4 (libc6,x86-64) => /lib/x86_64-linux-gnu/libcurl.so.4"
        if line.strip().startswith(soname + " (") and "=> " in line:
            return line.rsplit("=> ", 1)[1].strip()
    pytest.skip(f"{soname} is not in the loader's cache")


@pytest.mark.parametrize("soname, args, env, says", [
    ("libpq.so.5", ("config", "check"), {"HANGAR_STORE": "postgresql://nobody@127.0.0.1:1/none"},
     "HANGAR_STORE names PostgreSQL, but cannot load libpq.so.5"),
    ("libarchive.so.13", ("image", "import", "ARCHIVE"), {},
     "cannot load libarchive.so.13"),
    ("libcurl.so.4", ("sandbox", "create", "--provider", "e2b"),
     {"HANGAR_E2B_API_KEY": "e2b_x", "HANGAR_E2B_API_URL": "http://127.0.0.1:1"},
     "cannot load libcurl.so.4"),
])
def test_a_library_that_cannot_be_loaded_is_named(hangar, soname, args, env, says):
    """The library replaced by an empty file in a mount namespace of the run's own."""
    if os.geteuid() != 0:
        pytest.skip("hiding a library needs root (a mount namespace of its own)")
    path = os.path.realpath(library_path(soname))
    junk = tempfile.NamedTemporaryFile(suffix=".tar")
    junk.write(b"x" * 1024)
    junk.flush()
    args = tuple(junk.name if a == "ARCHIVE" else a for a in args)
    script = 'mount --bind /dev/null "$0" && exec "$@"'
    e = dict(hangar.env, **env)
    r = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c", script, path,
                        *hangar.argv(*args)],
                       env=e, stdin=subprocess.DEVNULL, capture_output=True, timeout=120)
    junk.close()
    err = r.stderr.decode(errors="replace")
    assert r.returncode == 1, (r.returncode, err)
    assert says in err, err
    # A message, not a crash: one line of hangar's, with the loader's reason.
    assert err.startswith("hangar: ") and err.count("\n") == 1, err
