"""hangar-envd runs once per sandbox, so every library it maps is paid once
per sandbox. Built against libmicrohttpd's static archive (meson.build says
which, in HANGAR_ENVD_WITHOUT_TLS), it must map no TLS library at all, and a
plain HTTP request must be served as before.
"""

import os
import socket

import pytest

TLS_LIBRARIES = ("libgnutls", "libp11-kit", "libnettle", "libhogweed", "libtasn1", "libssl", "libcrypto")


@pytest.mark.skipif(os.environ.get("HANGAR_ENVD_WITHOUT_TLS") != "1",
                    reason="this build links libmicrohttpd's shared library, which brings GnuTLS")
def test_a_serving_daemon_maps_no_tls_library(envd):
    assert envd.client.request("GET", "/health").status == 204
    with open(f"/proc/{envd.proc.pid}/maps") as f:
        mapped = {line.split()[-1] for line in f if "/" in line}
    tls = sorted(p for p in mapped if os.path.basename(p).startswith(TLS_LIBRARIES))
    assert tls == [], tls


def test_a_client_speaking_tls_gets_no_handshake_and_the_daemon_serves_on(envd):
    # A TLS ClientHello on the plain socket: with the TLS entry points standing in (notls.c),
    # reaching any of them would abort the daemon. It must answer as to any bad request and live.
    hello = bytes.fromhex("16030100c4010000c00303") + os.urandom(32) + bytes.fromhex("00000213010100")
    with socket.create_connection(("127.0.0.1", envd.client.port), timeout=10) as s:
        s.sendall(hello)
        s.shutdown(socket.SHUT_WR)  # no line end is coming: the daemon sees the end of the request
        answer = b""
        while chunk := s.recv(4096):
            answer += chunk
    assert not answer or answer.startswith(b"HTTP/1.1 400"), answer[:80]
    assert envd.client.request("GET", "/health").status == 204
    assert envd.proc.poll() is None
