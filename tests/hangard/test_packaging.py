"""What `meson install` puts on a machine is enough to run hangard.

The build is installed into a scratch DESTDIR by the project's own rules.
The systemd unit passes -config with the example configuration installed
beside it, so that file must be there, must parse, and must keep an
administrator's edits when hangard is installed again; the unit itself
must pass `systemd-analyze verify`. The example also documents every
HANGARD_* setting with the default config.c gives it.
"""

import os
import re
import shutil
import subprocess
import tempfile

import pytest

from conftest import READER, binary


def need(name):
    value = os.environ.get(name)
    if not value:
        pytest.skip(f"{name} is not set (run through meson test)")
    return value


def install(destdir):
    subprocess.run([need("MESON"), "install", "-C", need("HANGAR_BUILD_ROOT"), "--destdir", destdir,
                    "--no-rebuild", "--quiet"], check=True, stdout=subprocess.DEVNULL, timeout=300)


def staged(destdir, path):
    return os.path.join(destdir, path.lstrip("/"))


@pytest.fixture(scope="module")
def destdir():
    with tempfile.TemporaryDirectory(prefix="hangard-install-") as d:
        install(d)
        yield d


@pytest.fixture(scope="module")
def conf(destdir):
    path = staged(destdir, need("HANGARD_INSTALLED_CONF"))
    assert os.path.isfile(path), "the unit's -config file is not installed"
    return path


def settings_of_config_c():
    """{name: default or None} from config.c's table of HANGARD_* settings."""
    with open(os.path.join(need("HANGAR_SOURCE_ROOT"), "programs", "hangard", "config.c")) as f:
        text = f.read()
    rows = re.findall(r'\{ "(HANGARD_[A-Z_]+)", K_\w+, F\(\w+\), [^,]+, [^,]+, (NULL|"[^"]*") \}', text)
    assert len(rows) > 10, "config.c's table has changed shape: update this parser"
    return {name: None if d == "NULL" else d.strip('"') for name, d in rows}


def lines_of(path):
    """[(key, value, commented)] of the KEY=VALUE lines, commented out or not."""
    out = []
    with open(path) as f:
        for line in f:
            m = re.match(r"^(#?)(HANGARD?_[A-Z0-9_]+)=(.*)$", line.rstrip("\n"))
            if m:
                out.append((m.group(2), m.group(3), m.group(1) == "#"))
    return out


def test_the_installed_config_starts_hangard(conf, make_server):
    s = make_server(args=["-config", conf]).start()
    assert s.request("GET", "/livez", token=None).status == 200
    r = s.request("GET", "/readyz", token=READER)
    assert r.status == 200, r
    assert s.stop() == 0


def test_the_installed_config_names_the_tokens_file_beside_it(conf, make_server):
    tokens = os.path.join(os.path.dirname(need("HANGARD_INSTALLED_CONF")), "tokens")
    active = {k: v for k, v, commented in lines_of(conf) if not commented}
    assert active == {"HANGARD_TOKENS_FILE": tokens}, "only the tokens file is set; the rest show defaults"
    if os.path.exists(tokens):
        pytest.skip(f"{tokens} exists on this machine")
    # Without -tokens hangard refuses to start, naming the file to create.
    s = make_server()
    r = subprocess.run([binary(), "-config", conf, "-port", "0"], env=s.env, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=30)
    assert r.returncode != 0 and tokens in r.stderr.decode(), r.stderr


def test_the_example_shows_every_setting_at_its_default(conf, make_server):
    table = settings_of_config_c()
    shown = {k: v for k, v, _ in lines_of(conf) if k.startswith("HANGARD_")}
    assert set(shown) == set(table), (set(table) - set(shown), set(shown) - set(table))
    for name, default in table.items():
        if default is not None:
            assert shown[name] == default, f"{name} is shown as {shown[name]}, config.c's default is {default}"
    # And those defaults, all set at once, are a configuration hangard takes.
    s = make_server()
    every = os.path.join(s.workdir, "every.conf")
    with open(every, "w") as f:
        for name, default in table.items():
            if default is not None:
                f.write(f"{name}={default}\n")
    s.args += ["-config", every]
    s.start()
    assert s.request("GET", "/readyz", token=READER).status == 200


def test_the_example_names_only_real_library_settings(conf):
    root = os.path.join(need("HANGAR_SOURCE_ROOT"), "libhangar")
    known = set()
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            if name.endswith(".c"):
                with open(os.path.join(dirpath, name), errors="replace") as f:
                    known.update(re.findall(r'"(HANGAR_[A-Z0-9_]+)"', f.read()))
    named = {k for k, _, _ in lines_of(conf) if k.startswith("HANGAR_")}
    assert {"HANGAR_STORE", "HANGAR_STATE_DIR"} <= named
    assert named <= known, named - known


def test_installing_again_keeps_the_administrators_config(tmp_path):
    d = str(tmp_path / "dest")
    install(d)
    path = staged(d, need("HANGARD_INSTALLED_CONF"))
    # It may hold HANGAR_SECRET_KEY or a database password.
    assert os.stat(path).st_mode & 0o777 == 0o640
    with open(path, "a") as f:
        f.write("HANGARD_PORT=9999\n")
    with open(path) as f:
        edited = f.read()
    install(d)
    with open(path) as f:
        assert f.read() == edited


def test_systemd_analyze_verifies_the_unit(destdir, conf, tmp_path):
    unit = staged(destdir, need("HANGARD_INSTALLED_UNIT"))
    with open(unit) as f:
        text = f.read()
    # The unit runs the installed hangard with the installed config.
    m = re.search(r"^ExecStart=(\S+) -config (\S+)$", text, re.M)
    assert m, text
    assert m.group(1) == need("HANGARD_INSTALLED_BIN") and os.access(staged(destdir, m.group(1)), os.X_OK)
    assert staged(destdir, m.group(2)) == conf
    analyze = shutil.which("systemd-analyze")
    if not analyze:
        pytest.skip("no systemd-analyze")
    # verify looks for ExecStart's program and Documentation's man page on
    # this machine: point it at the staged ones, changing nothing else.
    copy = tmp_path / "hangard.service"
    copy.write_text(text.replace(f"ExecStart={m.group(1)} ", f"ExecStart={staged(destdir, m.group(1))} "))
    env = dict(os.environ, MANPATH=staged(destdir, need("HANGARD_INSTALLED_MANDIR")))
    r = subprocess.run([analyze, "verify", str(copy)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=120)
    out = (r.stdout + r.stderr).decode(errors="replace")
    # Unknown keys and the like are only warnings (exit 0): any word on this unit fails.
    about_unit = [l for l in out.splitlines() if "hangard.service" in l]
    assert r.returncode == 0 and not about_unit, out
