/*
 * TLS entry points for a libmicrohttpd linked statically into hangar-envd,
 * so that the daemon loads no TLS library.
 *
 * hangar-envd serves plain HTTP on a socket only its jail (or the platform's
 * proxy) reaches; it never asks libmicrohttpd for TLS. Yet a libmicrohttpd
 * built with HTTPS support calls gnutls_global_init() from its constructor,
 * and linking GnuTLS brings nine more libraries with it: their relocations,
 * their data and the ASN.1 tables GnuTLS builds at start-up cost about 300 KiB
 * of private memory in every sandbox. meson.build links the static archive
 * with these definitions instead, and only when a test program shows they are
 * all it needs; otherwise it links the shared library as usual.
 *
 * Start-up and shutdown succeed and do nothing. Every other entry point is
 * reached only on a TLS connection, which the daemon never configures: it
 * aborts, naming itself, rather than pretend a handshake happened.
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#include "notls.h"

int gnutls_global_init(void)
{
	return 0;
}

void gnutls_global_deinit(void)
{
}

static _Noreturn void no_tls(const char *name)
{
	fprintf(stderr, "hangar-envd: %s called, but this daemon is built without TLS\n", name);
	abort();
}

static void *no_tls_malloc(size_t n)
{
	(void)n;
	no_tls("gnutls_malloc");
}

void *(*gnutls_malloc)(size_t) = no_tls_malloc;

#define NO_TLS(name) \
	int name(void) \
	{ \
		no_tls(#name); \
	}
NOTLS_ENTRY_POINTS(NO_TLS)
#undef NO_TLS
