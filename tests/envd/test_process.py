"""process.Process behaviour at the wire level."""

import base64
import json
import os
import time

import pytest

from envdwire import (Deadline, FLAG_END_STREAM, b64, basic_user, end_error, events, poll,
                      raw_stream)

START = "/process.Process/Start"
CONNECT = "/process.Process/Connect"
SIGNAL = "/process.Process/SendSignal"


def sh(script, tag=None, stdin=False):
    msg = {"process": {"cmd": "/bin/sh", "args": ["-c", script]}, "stdin": stdin}
    if tag:
        msg["tag"] = tag
    return msg


def run(client, msg, headers=None, timeout=60):
    """A whole Start call: (events, end-stream error or None)."""
    status, envs, raw = client.stream(START, msg, headers=headers, timeout=timeout)
    assert status == 200, raw
    return events(envs), end_error(envs)


def stdout_of(evs):
    return b"".join(base64.b64decode(b["stdout"]) for k, b in evs if k == "data" and "stdout" in b)


def pid_alive(pid):
    """True while pid exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
        return state != "Z"
    except FileNotFoundError:
        return False


def kill_quietly(client, pid):
    client.unary(SIGNAL, {"process": {"pid": pid}, "signal": "SIGNAL_SIGKILL"})


# ---- basics the other tests lean on -----------------------------------------------


def test_start_event_order(client):
    evs, err = run(client, sh("echo out; echo err >&2; exit 3"))
    assert err is None
    kinds = [k for k, _ in evs]
    assert kinds[0] == "start" and kinds.count("start") == 1
    assert kinds[-1] == "end" and kinds.count("end") == 1
    assert isinstance(evs[0][1]["pid"], int) and evs[0][1]["pid"] > 0
    assert stdout_of(evs) == b"out\n"
    stderr = b"".join(base64.b64decode(b["stderr"]) for k, b in evs if k == "data" and "stderr" in b)
    assert stderr == b"err\n"
    end = evs[-1][1]
    assert end.get("exitCode") == 3 and end.get("exited") is True
    assert end.get("status") == "exit status 3"


def test_daemon_flags_workdir_and_env(make_envd, tmp_path):
    wd = tmp_path / "wd"
    wd.mkdir()
    d = make_envd(workdir=wd, env={"HANGAR_TEST_VAR": "from-flag", "SHADOWED": "daemon"})
    msg = sh('pwd; echo "$HANGAR_TEST_VAR"; echo "$SHADOWED"')
    msg["process"]["envs"] = {"SHADOWED": "request"}
    evs, err = run(d.client, msg)
    assert err is None
    assert stdout_of(evs) == f"{wd}\nfrom-flag\nrequest\n".encode()
    r = d.client.request("GET", "/envs")
    assert r.status == 200
    assert r.json().get("HANGAR_TEST_VAR") == "from-flag"


@pytest.mark.skipif(os.geteuid() != 0, reason="switching users needs root")
def test_basic_user_runs_as_that_user(client):
    msg = sh("id -un; echo $USER")
    msg["process"]["cwd"] = "/"
    status, envs, _ = client.stream(START, msg, headers={"Authorization": basic_user("nobody")})
    assert status == 200
    assert end_error(envs) is None
    assert stdout_of(events(envs)) == b"nobody\nnobody\n"


def test_missing_binary_exit_127(client):
    evs, err = run(client, {"process": {"cmd": "/no/such/binary"}})
    assert err is None
    assert [k for k, _ in evs][0] == "start"
    assert evs[-1][1].get("exitCode") == 127


def test_bad_cwd(client, tmp_path):
    msg = sh("true")
    msg["process"]["cwd"] = str(tmp_path / "missing")
    evs, err = run(client, msg)
    assert err is not None and err["code"] == "invalid_argument", err
    assert evs == []


@pytest.mark.parametrize("cwd", ["~nobody", "~root/x"])
def test_cwd_tilde_user_refused(client, cwd):
    msg = sh("pwd")
    msg["process"]["cwd"] = cwd
    evs, err = run(client, msg)
    assert err is not None and err["code"] == "invalid_argument", (err, evs)
    assert evs == []


# ---- keepalive ----------------------------------------------------------------------


@pytest.mark.parametrize("interval", ["0", "-5", "abc", "", "99999999999999999999"])
def test_keepalive_bad_interval_does_not_crash(envd, interval):
    # Upstream crashes on 0 and negative intervals; the default (90 s) must apply instead.
    evs, err = run(envd.client, sh("sleep 1; echo done"), headers={"Keepalive-Ping-Interval": interval})
    assert err is None
    assert stdout_of(evs) == b"done\n"
    assert "keepalive" not in [k for k, _ in evs]
    assert envd.alive()
    assert envd.client.health() == 204


@pytest.mark.parametrize("interval", ["0", "-5"])
def test_keepalive_bad_interval_on_connect(envd, interval):
    call = envd.client.open_stream(START, sh("sleep 30"))
    with call:
        pid = call.next()[1]["event"]["start"]["pid"]
    try:
        status, envs, _ = envd.client.stream(CONNECT, {"process": {"pid": pid}},
                                             headers={"Keepalive-Ping-Interval": interval,
                                                      "Connect-Timeout-Ms": "1500"})
        assert status == 200
        assert end_error(envs)["code"] == "deadline_exceeded"
        kinds = [k for k, _ in events(envs)]
        assert kinds == ["start"], kinds
        assert envd.client.health() == 204
    finally:
        kill_quietly(envd.client, pid)


@pytest.mark.parametrize("interval", ["0", "-5"])
def test_keepalive_bad_interval_on_watch(envd, tmp_path, interval):
    status, envs, _ = envd.client.stream("/filesystem.Filesystem/WatchDir", {"path": str(tmp_path)},
                                         headers={"Keepalive-Ping-Interval": interval,
                                                  "Connect-Timeout-Ms": "1500"})
    assert status == 200
    assert end_error(envs)["code"] == "deadline_exceeded"
    msgs = [o for f, o in envs if not f & FLAG_END_STREAM]
    assert msgs == [{"start": {}}], msgs
    assert envd.client.health() == 204


def test_keepalive_when_silent(client):
    evs, err = run(client, sh("sleep 3.5"), headers={"Keepalive-Ping-Interval": "1"})
    assert err is None
    kinds = [k for k, _ in evs]
    assert kinds[0] == "start" and kinds[-1] == "end"
    assert kinds.count("keepalive") >= 1, kinds
    for k, b in evs:
        if k == "keepalive":
            assert b == {}


def test_keepalive_wire_shape(client):
    call = client.open_stream(START, sh("sleep 2"), headers={"Keepalive-Ping-Interval": "1"})
    with call:
        seen = []
        while True:
            raw = call.next_raw()
            assert raw is not None
            flags, payload = raw
            if flags & FLAG_END_STREAM:
                break
            seen.append(json.loads(payload))
    assert {"event": {"keepalive": {}}} in seen, seen


# ---- exit retention ------------------------------------------------------------------


def test_connect_after_exit_retained_then_gone(client):
    evs, err = run(client, sh("exit 7"))
    assert err is None
    pid = evs[0][1]["pid"]
    exited_at = time.monotonic()
    end = evs[-1][1]

    status, envs, _ = client.stream(CONNECT, {"process": {"pid": pid}})
    assert status == 200
    assert end_error(envs) is None
    cevs = events(envs)
    assert [k for k, _ in cevs] == ["start", "end"], cevs
    assert cevs[0][1]["pid"] == pid
    assert cevs[1][1] == end

    def gone():
        s, e, _ = client.stream(CONNECT, {"process": {"pid": pid}})
        err = end_error(e)
        if err is None:
            return False
        assert err["code"] == "not_found", err
        return True

    poll(gone, 45, interval=0.5, what="retained exit to expire")
    # Retention is about 30 s: forgetting much earlier would break SDK reconnects.
    assert time.monotonic() - exited_at >= 25


def test_connect_by_tag_after_exit(client):
    evs, err = run(client, sh("exit 2", tag="finished-tag"))
    assert err is None
    pid = evs[0][1]["pid"]
    status, envs, _ = client.stream(CONNECT, {"process": {"tag": "finished-tag"}})
    assert end_error(envs) is None
    cevs = events(envs)
    assert cevs[0] == ("start", {"pid": pid})
    assert cevs[-1][1].get("exitCode") == 2


# ---- tags ------------------------------------------------------------------------------


def test_connect_by_tag_with_several_tagged(client):
    tags = ["alpha", "beta", "gamma", "delta"]
    pids = {}
    calls = []
    try:
        for t in tags:
            call = client.open_stream(START, sh("sleep 30", tag=t))
            calls.append(call)
            flags, obj = call.next()
            pids[t] = obj["event"]["start"]["pid"]
        assert len(set(pids.values())) == len(tags)
        # Upstream stops at the first tagged process that does not match; every tag must be found.
        for t in reversed(tags):
            c = client.open_stream(CONNECT, {"process": {"tag": t}}, headers={"Connect-Timeout-Ms": "5000"})
            with c:
                flags, obj = c.next()
                assert not flags & FLAG_END_STREAM, obj
                assert obj["event"]["start"]["pid"] == pids[t], (t, obj, pids)
        status, envs, _ = client.stream(CONNECT, {"process": {"tag": "no-such-tag"}})
        assert end_error(envs)["code"] == "not_found"
        # An untagged lookup by pid still works alongside.
        r = client.unary("/process.Process/List", {})
        listed = {p["pid"]: p.get("tag") for p in r.json()["processes"]}
        for t in tags:
            assert listed[pids[t]] == t
    finally:
        for c in calls:
            c.close()
        for pid in pids.values():
            kill_quietly(client, pid)


# ---- clients that go away ---------------------------------------------------------------


def test_client_vanishes_mid_stream(envd, tmp_path):
    marker = tmp_path / "marker"
    script = f"sleep 2; echo x; echo done > '{marker}'"
    rc, status, _, reader = raw_stream(envd.port, START, sh(script))
    try:
        assert status == 200
        flags, obj = reader.next_envelope()
        pid = obj["event"]["start"]["pid"]
    finally:
        rc.abort()
    # The process keeps running without its stream.
    assert pid in envd.client.list_pids()
    assert envd.client.health() == 204
    poll(lambda: marker.exists(), 20, what="the orphaned process to finish")
    assert marker.read_text() == "done\n"
    poll(lambda: pid not in envd.client.list_pids(), 10, what="the process to leave List")


def test_connect_stream_closed_leaves_process(client):
    call = client.open_stream(START, sh("sleep 30"))
    with call:
        pid = call.next()[1]["event"]["start"]["pid"]
    try:
        c = client.open_stream(CONNECT, {"process": {"pid": pid}})
        with c:
            assert c.next()[1]["event"]["start"]["pid"] == pid
        # Closing a Connect stream never kills the process.
        assert pid in client.list_pids()
        assert pid_alive(pid)
    finally:
        kill_quietly(client, pid)


# ---- deadlines and signals ----------------------------------------------------------------


def test_start_deadline_kills_process(client):
    t0 = time.monotonic()
    call = client.open_stream(START, sh("sleep 30"), headers={"Connect-Timeout-Ms": "500"})
    with call:
        envs = list(call.envelopes())
    took = time.monotonic() - t0
    err = end_error(envs)
    assert err is not None and err["code"] == "deadline_exceeded", envs
    evs = events(envs)
    pid = evs[0][1]["pid"]
    assert took < 10, took
    poll(lambda: pid not in client.list_pids(), 5, what="the timed-out process to leave List")
    poll(lambda: not pid_alive(pid), 5, what="the timed-out process to die")


def test_connect_deadline_does_not_kill(client):
    call = client.open_stream(START, sh("sleep 30"))
    with call:
        pid = call.next()[1]["event"]["start"]["pid"]
    try:
        status, envs, _ = client.stream(CONNECT, {"process": {"pid": pid}},
                                        headers={"Connect-Timeout-Ms": "300"})
        assert end_error(envs)["code"] == "deadline_exceeded"
        assert pid in client.list_pids()
        assert pid_alive(pid)
    finally:
        kill_quietly(client, pid)


def test_sigterm_ends_stream(client):
    call = client.open_stream(START, sh("sleep 30"))
    with call:
        pid = call.next()[1]["event"]["start"]["pid"]
        r = client.unary(SIGNAL, {"process": {"pid": pid}, "signal": "SIGNAL_SIGTERM"})
        assert r.status == 200 and r.json() == {}, r
        envs = list(call.envelopes())
    assert end_error(envs) is None
    end = events(envs)[-1]
    assert end[0] == "end"
    assert end[1].get("exitCode") == -1
    assert "exited" not in end[1] or end[1]["exited"] is False
    assert end[1].get("status") == "signal: terminated"


def test_unsupported_signal(client):
    call = client.open_stream(START, sh("sleep 30"))
    with call:
        pid = call.next()[1]["event"]["start"]["pid"]
    try:
        r = client.unary(SIGNAL, {"process": {"pid": pid}, "signal": "SIGNAL_UNSPECIFIED"})
        assert r.status == 501 and r.json()["code"] == "unimplemented", r
    finally:
        kill_quietly(client, pid)


# ---- volume -----------------------------------------------------------------------------------


FLOOD = 200 << 20


def test_flood_all_bytes_arrive(client):
    call = client.open_stream(START, {"process": {"cmd": "head", "args": ["-c", str(FLOOD), "/dev/zero"]},
                                      "stdin": False}, timeout=120)
    total = 0
    nonzero = False
    end = None
    with call:
        flags, obj = call.next()
        assert "start" in obj["event"]
        while True:
            flags, obj = call.next()
            if flags & FLAG_END_STREAM:
                assert obj == {}, obj
                break
            ev = obj["event"]
            if "data" in ev:
                chunk = base64.b64decode(ev["data"]["stdout"])
                nonzero |= any(chunk)
                total += len(chunk)
            elif "end" in ev:
                end = ev["end"]
    assert total == FLOOD
    assert not nonzero
    assert end is not None
    assert end.get("exited") is True and "exitCode" not in end


def test_flood_to_vanished_client_does_not_wedge(envd):
    rc, status, _, reader = raw_stream(envd.port, START,
                                       {"process": {"cmd": "head", "args": ["-c", str(FLOOD), "/dev/zero"]},
                                        "stdin": False})
    try:
        pid = reader.next_envelope()[1]["event"]["start"]["pid"]
        got = 0
        while got < (1 << 20):
            flags, obj = reader.next_envelope()
            if "data" in obj.get("event", {}):
                got += len(base64.b64decode(obj["event"]["data"]["stdout"]))
    finally:
        rc.abort()
    # The daemon keeps answering while the child's output has nowhere to go...
    assert envd.client.health() == 204
    assert envd.client.unary("/process.Process/List", {}).status == 200
    # ...and the child is not blocked forever on a full pipe.
    poll(lambda: pid not in envd.client.list_pids(), 60, interval=0.2, what="the flooding process to finish")
    evs, err = run(envd.client, sh("echo still-working"))
    assert stdout_of(evs) == b"still-working\n"


def wchar(pid):
    try:
        with open(f"/proc/{pid}/io") as f:
            for line in f:
                if line.startswith("wchar:"):
                    return int(line.split()[1])
    except (FileNotFoundError, ProcessLookupError):
        return None
    return None


def test_flood_to_stalled_then_vanished_client(envd):
    # The client stops reading, so the child ends up blocked on back-pressure; then the client goes away.
    rc, status, _, reader = raw_stream(envd.port, START,
                                       {"process": {"cmd": "head", "args": ["-c", str(FLOOD), "/dev/zero"]},
                                        "stdin": False})
    try:
        pid = reader.next_envelope()[1]["event"]["start"]["pid"]
        last = [wchar(pid), 0]

        def stalled():
            now = wchar(pid)
            if now is None:
                return True  # finished without ever blocking: nothing to wedge
            if now == last[0]:
                last[1] += 1
            else:
                last[:] = [now, 0]
            return last[1] >= 5

        poll(stalled, 30, interval=0.1, what="the child to block on a client that does not read")
        assert envd.client.health() == 204
    finally:
        rc.abort()
    poll(lambda: pid not in envd.client.list_pids(), 60, interval=0.2, what="the flooding process to finish")
    assert envd.client.unary("/process.Process/List", {}).status == 200


def test_many_concurrent_requests(envd):
    from concurrent.futures import ThreadPoolExecutor

    def one(i):
        if i % 2:
            return envd.client.health(timeout=30) == 204
        r = envd.client.unary("/process.Process/List", {})
        return r.status == 200 and isinstance(r.json().get("processes", []), list)

    with ThreadPoolExecutor(max_workers=300) as ex:
        results = list(ex.map(one, range(600)))
    assert all(results), results.count(False)


def test_concurrent_starts(envd):
    from concurrent.futures import ThreadPoolExecutor

    def one(i):
        evs, err = run(envd.client, sh(f"echo {i}"))
        return err is None and stdout_of(evs) == f"{i}\n".encode()

    with ThreadPoolExecutor(max_workers=50) as ex:
        results = list(ex.map(one, range(100)))
    assert all(results), results.count(False)


def test_stdin_round_trip(client):
    call = client.open_stream(START, sh("head -c 5; echo; cat >/dev/null; echo eof", stdin=True))
    with call:
        pid = call.next()[1]["event"]["start"]["pid"]
        r = client.unary("/process.Process/SendInput", {"process": {"pid": pid}, "input": {"stdin": b64(b"hello")}})
        assert r.status == 200, r
        r = client.unary("/process.Process/CloseStdin", {"process": {"pid": pid}})
        assert r.status == 200, r
        envs = list(call.envelopes())
    assert end_error(envs) is None
    assert stdout_of(events(envs)) == b"hello\neof\n"


def test_deadline_is_polled_without_data(client):
    # A deadline in the middle of a stream of data still ends it.
    d = Deadline(15)
    status, envs, _ = client.stream(START, sh("while :; do echo tick; sleep 0.05; done"),
                                    headers={"Connect-Timeout-Ms": "700"})
    assert not d.expired()
    assert end_error(envs)["code"] == "deadline_exceeded"
