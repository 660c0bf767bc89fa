"""/readyz means the state store answers: a SQLite file replaced under
hangard, a PostgreSQL server stopped under it (suite postgres, pg-run.sh)."""

import os
import re
import shutil
import subprocess

import pytest

PG = os.environ.get("HANGAR_TEST_PG_HOST")
needs_pg = pytest.mark.skipif(not PG, reason="needs a PostgreSQL server from tests/store/pg-run.sh (suite postgres)")


def assert_unready(r, kind):
    assert r.status == 503, r
    assert int(r.header("Retry-After")) >= 1, r.headers
    err = r.json()["error"]
    assert err["kind"] == kind and err["retry_after_s"] >= 1, err
    assert "state store" in err["message"], err
    return err


def test_readyz_when_the_sqlite_file_is_replaced(make_server):
    s = make_server().start()
    assert s.ok("GET", "/readyz").json()["status"] == "ready"
    db = os.path.join(s.state_dir, "hangar.db")
    assert os.path.exists(db)
    # Same bytes, another file: the open connection would go on writing to the old one.
    shutil.copyfile(db, db + ".new")
    os.replace(db + ".new", db)
    err = assert_unready(s.request("GET", "/readyz"), "os")
    assert "moved, replaced or deleted" in err["message"], err
    s.ok("GET", "/livez", token=None)  # alive, only not ready


def pg_env():
    return {**os.environ, "PGPASSWORD": os.environ["HANGAR_TEST_PG_PASSWORD"]}


def psql(sql, db="postgres"):
    r = subprocess.run(["psql", "-X", "-q", "-t", "-A", "-v", "ON_ERROR_STOP=1", "-h", PG,
                        "-p", os.environ["HANGAR_TEST_PG_PORT"], "-U", os.environ["HANGAR_TEST_PG_USER"],
                        "-d", db, "-c", sql], env=pg_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stdout.decode().strip()


def pg_ctl(*args):
    subprocess.run([os.environ["HANGAR_TEST_PG_CTL"], *args], check=True, stdout=subprocess.DEVNULL, timeout=180)


@needs_pg
def test_readyz_on_postgresql_follows_the_server(make_server):
    db = f"hangard_readyz_{os.getpid()}"
    psql(f"CREATE DATABASE {db}")
    password = os.environ["HANGAR_TEST_PG_PASSWORD"]
    url = (f"postgresql://{os.environ['HANGAR_TEST_PG_USER']}:{password}@/{db}"
           f"?host={PG}&port={os.environ['HANGAR_TEST_PG_PORT']}")
    s = make_server(env={"HANGAR_STORE": url}).start()
    assert s.ok("GET", "/readyz").json()["status"] == "ready"
    # The ping reached that database: it made the schema there.
    assert psql("SELECT count(*) FROM information_schema.tables WHERE table_name = 'leases'", db) == "1"
    pg_ctl("stop", "-m", "immediate")
    try:
        r = s.request("GET", "/readyz")
        assert_unready(r, "unavailable")
        assert password.encode() not in r.body
        # Nor how the store is reached: not its socket directory, port or database.
        answers = [r, s.request("GET", "/v1/sessions"), s.request("GET", "/v1/sessions/s-0123456789")]
        for a in answers:
            assert a.status >= 500, a
            for secret in (PG, os.environ["HANGAR_TEST_PG_PORT"], db):
                assert secret.encode() not in a.body, (secret, a)
        s.ok("GET", "/livez", token=None)
    finally:
        # start (unlike restart) does not reuse the options pg-run.sh gave: the same again.
        pg_ctl("start", "-o", f"-k {PG} -c listen_addresses= -p {os.environ['HANGAR_TEST_PG_PORT']} -c fsync=off")
    assert s.ok("GET", "/readyz").json()["status"] == "ready"
    assert password not in s.log_text()


def test_the_man_page_names_every_table_the_store_keeps():
    # hangard(8)'s "Several replicas" says what moves to PostgreSQL: every
    # table the store's migrations create, so a new one cannot go unsaid.
    root = os.environ.get("HANGAR_SOURCE_ROOT") or os.path.join(os.path.dirname(__file__), "..", "..")
    with open(os.path.join(root, "libhangar", "store", "store.c")) as f:
        tables = set(re.findall(r"CREATE TABLE (?:IF NOT EXISTS )?(\w+)", f.read()))
    with open(os.path.join(root, "man", "hangard.8")) as f:
        page = f.read()
    section = page[page.index(".SS Several replicas"):page.index(".SS Reaper")]
    named = set(re.findall(r"^\.RB \( (\w+)", section, re.M))
    assert {"sandboxes", "sessions", "leases"} <= tables, tables
    assert tables <= named, tables - named
