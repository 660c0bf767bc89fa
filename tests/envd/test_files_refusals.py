"""/files refusals that come before any byte is moved: whom the request acts
for, which path it names, and what the body says about its files.

Each answer is an envd REST error, {"code": status, "message": ...}, with the
status the E2B SDKs map to an error class; a refused upload writes nothing.
"""

import os
import pwd
import secrets
import urllib.parse

import pytest

OTHER_USER = "user"


def files_url(path=None, user=None):
    q = {}
    if path is not None:
        q["path"] = path
    if user is not None:
        q["username"] = user
    return "/files?" + urllib.parse.urlencode(q)


def upload_raw(client, path, data, user=None):
    return client.request("POST", files_url(path, user), body=data,
                          headers={"Content-Type": "application/octet-stream"})


def upload_parts(client, parts, path=None, user=None):
    """parts: (name, filename or None, data) tuples, sent as multipart/form-data."""
    boundary = "b" + secrets.token_hex(8)
    body = b""
    for name, filename, data in parts:
        disp = f'form-data; name="{name}"' + (f'; filename="{filename}"' if filename is not None else "")
        body += (f"--{boundary}\r\nContent-Disposition: {disp}\r\n"
                 "Content-Type: application/octet-stream\r\n\r\n").encode() + data + b"\r\n"
    body += f"--{boundary}--\r\n".encode()
    return client.request("POST", files_url(path, user), body=body,
                          headers={"Content-Type": f"multipart/form-data; boundary={boundary}"})


def refused(resp, status, message_start):
    assert resp.status == status, resp
    err = resp.json()
    assert err["code"] == status, err
    assert err["message"].startswith(message_start), err


def test_unknown_user_is_401_and_nothing_is_written(client, tmp_path):
    user = "nosuchuser" + secrets.token_hex(4)
    src = tmp_path / "there.txt"
    src.write_bytes(b"x")
    want = f"error looking up user '{user}': user: unknown user {user}"
    refused(client.request("GET", files_url(str(src), user)), 401, want)
    refused(upload_raw(client, str(tmp_path / "raw.txt"), b"y", user), 401, want)
    refused(upload_parts(client, [("file", "parts.txt", b"z")], str(tmp_path / "parts.txt"), user), 401, want)
    assert sorted(os.listdir(tmp_path)) == ["there.txt"]


def test_a_path_that_cannot_be_resolved_is_400(client, tmp_path):
    bad = "~root/x"
    refused(client.request("GET", files_url(bad)), 400, f"error expanding and resolving path '{bad}': ")
    refused(upload_raw(client, bad, b"y"), 400, "error resolving path: ")
    refused(upload_parts(client, [("file", bad, b"z")]), 400, "error resolving path: ")


def test_raw_upload_needs_a_path(client):
    refused(upload_raw(client, None, b"y"), 400, "path query parameter is required for raw body upload")


def test_a_file_part_needs_a_name_from_somewhere(client):
    refused(upload_parts(client, [("file", None, b"z")]), 400,
            "error getting multipart custom part file name: filename not found")


def test_two_files_to_one_path_keep_the_first(client, tmp_path):
    target = str(tmp_path / "once.txt")
    resp = upload_parts(client, [("file", target, b"first"), ("file", target, b"second")])
    refused(resp, 400, f"you cannot upload multiple files to the same path '{target}'")
    with open(target, "rb") as f:
        assert f.read() == b"first"


def test_parts_not_named_file_are_skipped(client, tmp_path):
    target = tmp_path / "kept.txt"
    resp = upload_parts(client, [("other", str(tmp_path / "skipped.txt"), b"no"), ("file", str(target), b"yes")])
    assert resp.status == 200, resp
    assert [e["path"] for e in resp.json()] == [str(target)]
    assert target.read_bytes() == b"yes"
    assert not (tmp_path / "skipped.txt").exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root: only root can act as another user")
def test_single_uid_refuses_another_user_with_403(make_envd, tmp_path):
    try:
        pwd.getpwnam(OTHER_USER)
    except KeyError:
        pytest.skip(f"needs the Unix user '{OTHER_USER}' (./dev creates it)")
    client = make_envd(extra=["-single-uid"]).client
    os.chmod(tmp_path, 0o777)
    src = tmp_path / "readable.txt"
    src.write_bytes(b"x")
    os.chmod(src, 0o644)
    want = f"cannot act as user '{OTHER_USER}': "
    refused(client.request("GET", files_url(str(src), OTHER_USER)), 403, want)
    refused(upload_raw(client, str(tmp_path / "raw.txt"), b"y", OTHER_USER), 403, want)
    refused(upload_parts(client, [("file", str(tmp_path / "parts.txt"), b"z")], user=OTHER_USER), 403, want)
    assert sorted(os.listdir(tmp_path)) == ["readable.txt"]
    # The daemon's own user is still served.
    assert client.request("GET", files_url(str(src))).status == 200


def upload_with_metadata(client, path, meta):
    headers = {"Content-Type": "application/octet-stream"}
    headers.update({"X-Metadata-" + k: v for k, v in meta.items()})
    return client.request("POST", files_url(path), body=b"data", headers=headers)


@pytest.mark.parametrize("meta, says", [
    ({"k" * 247: "v"}, "invalid metadata: key '" + "k" * 247 + "' is longer than 246 bytes"),
    ({"a": "v" * 2000, "b": "v" * 2100}, "invalid metadata: total size 4120 exceeds 4096 bytes"),
    ({"a": "caf\xe9"}, "invalid metadata: key 'a': keys and values must be printable ASCII"),
])
def test_metadata_that_breaks_the_rules_is_400_before_the_file_is_touched(client, tmp_path, meta, says):
    target = tmp_path / "meta.txt"
    target.write_bytes(b"before")
    refused(upload_with_metadata(client, str(target), meta), 400, says)
    assert target.read_bytes() == b"before"


def test_a_key_of_246_bytes_is_kept(client, tmp_path):
    target = tmp_path / "meta.txt"
    meta = {"k" * 246: "v"}
    resp = upload_with_metadata(client, str(target), meta)
    assert resp.status == 200, resp
    assert resp.json()[0]["metadata"] == meta
    assert target.read_bytes() == b"data"


@pytest.mark.parametrize("raw", ["%00", "%FF%FE", "%C0%AF", "%ED%A0%80"])
def test_a_query_with_nul_or_bad_utf8_is_400_and_nothing_is_cut(client, tmp_path, raw):
    # The path would be cut at a NUL to <tmp>/report: it must be refused whole.
    (tmp_path / "report").write_bytes(b"old")
    path = urllib.parse.quote(str(tmp_path / "report")) + raw + ".txt"
    r = client.request("GET", "/files?path=" + path)
    assert r.status == 400, r
    r = client.request("POST", "/files?path=" + path, body=b"new",
                       headers={"Content-Type": "application/octet-stream"})
    assert r.status == 400, r
    assert (tmp_path / "report").read_bytes() == b"old"
    assert sorted(os.listdir(tmp_path)) == ["report"]
    # A name with the bad bytes is refused the same way.
    r = client.request("GET", "/files?pa" + raw + "th=" + urllib.parse.quote(str(tmp_path / "report")))
    assert r.status == 400, r
