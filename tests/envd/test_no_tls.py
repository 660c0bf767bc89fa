"""hangar-envd runs once per sandbox, so every library it maps is paid once
per sandbox. Built against libmicrohttpd's static archive (meson.build says
which, in HANGAR_ENVD_WITHOUT_TLS), it must map no TLS library at all, and a
plain HTTP request must be served as before.
"""

import os

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
