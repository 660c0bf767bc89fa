/*
 * The edge's TLS to a platform's envd (an e2b-provider sandbox on E2B has
 * an https envd URL). libcurl, the project's TLS-capable dependency, only
 * sets the connection up (CURLOPT_CONNECT_ONLY: TCP, TLS handshake,
 * certificate and name verification) and then carries bytes with
 * curl_easy_send() and curl_easy_recv(); the HTTP/1.1 on top is the edge's
 * own (e2b-edge-http.c), the same as over plain TCP, so that answers are
 * streamed as they come and the connection can be kept for the next request.
 *
 * Verification is always on: the system's CAs (libcurl's default bundle and
 * directory) and, when HANGARD_EDGE_CA_FILE names one, the certificates of
 * that file too. Without it, HANGAR_E2B_CA_FILE's are taken: the library's
 * own requests to the platform (control API, envd) trust those, and a
 * platform with a private CA has one CA for both.
 *
 * Each connection builds its TLS context anew, CA store included: parsing
 * the whole system bundle each time costs more than the handshake. When
 * libcurl has a CA directory (hashed, looked up by issuer as needed), the
 * system's CAs are taken from it alone and the bundle is not read.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>
#include <pthread.h>

#include "e2b-edge.h"
#include "hangard.h"

/* A CA file larger than this is not one. */
#define EDGE_CA_MAX (32u << 20)

static pthread_once_t tls_once = PTHREAD_ONCE_INIT;
static int tls_ready;         /* curl_global_init went well */
static char *ca_bundle;       /* the default bundle and the CA file, or NULL */
static size_t ca_bundle_len;
static int ca_dir;            /* libcurl has a CA directory: no bundle is read */
static char ca_error[512];    /* why the CA file cannot be used */
static const char *ca_setting = "HANGARD_EDGE_CA_FILE";  /* the setting that named it */

/* Appends the file at path to the bundle: 0, or -1. */
static int append_file(const char *path, int required)
{
	FILE *f = fopen(path, "re");
	char chunk[8192];
	size_t n;
	int rc = 0;

	if (!f) {
		if (required)
			snprintf(ca_error, sizeof(ca_error), "cannot open %s %.400s: %s", ca_setting, path,
				 strerror(errno));
		return required ? -1 : 0;
	}
	while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0) {
		char *p;
		if (ca_bundle_len + n + 2 > EDGE_CA_MAX) {
			snprintf(ca_error, sizeof(ca_error), "the CA file %.400s is too large", path);
			rc = -1;
			break;
		}
		p = realloc(ca_bundle, ca_bundle_len + n + 2);
		if (!p) {
			snprintf(ca_error, sizeof(ca_error), "out of memory");
			rc = -1;
			break;
		}
		ca_bundle = p;
		memcpy(ca_bundle + ca_bundle_len, chunk, n);
		ca_bundle_len += n;
	}
	if (rc == 0 && ferror(f)) {
		snprintf(ca_error, sizeof(ca_error), "cannot read the CA file %.400s", path);
		rc = -1;
	}
	fclose(f);
	if (rc == 0 && ca_bundle) {
		/* PEM files need not end with a newline; the next one starts on a line of its own. */
		ca_bundle[ca_bundle_len++] = '\n';
	}
	return rc;
}

static void tls_init(void)
{
	const char *extra = hangard->cfg->edge_ca_file;
	hangar_buf e2b_ca = HANGAR_BUF_INIT;
	char *def = NULL, *path = NULL;
	CURL *h;

	/* HANGARD_EDGE_CA_FILE wins; without it, the e2b provider's. */
	if ((!extra || !extra[0]) && hangar_ctx_get(&e2b_ca, hangard->ctx, "HANGAR_E2B_CA_FILE") == 0 && e2b_ca.ptr &&
	    e2b_ca.ptr[0]) {
		extra = e2b_ca.ptr;
		ca_setting = "HANGAR_E2B_CA_FILE";
	}

	if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK || !(h = curl_easy_init())) {
		snprintf(ca_error, sizeof(ca_error), "libcurl cannot be initialised");
		hangar_buf_dispose(&e2b_ca);
		return;
	}
	tls_ready = 1;
	if (curl_easy_getinfo(h, CURLINFO_CAPATH, &path) == CURLE_OK && path && path[0])
		ca_dir = 1;
	if (ca_dir) {
		/* The directory for the system's CAs, the file (if any) as the bundle. */
		if (extra && extra[0] && append_file(extra, 1) < 0)
			tls_ready = 0;
	} else if (extra && extra[0]) {
		/* CURLOPT_CAINFO_BLOB replaces the default bundle: both go in one
		 * blob, read once (the edge connects often, the files change rarely). */
		if (curl_easy_getinfo(h, CURLINFO_CAINFO, &def) == CURLE_OK && def && def[0] && append_file(def, 0) < 0)
			tls_ready = 0;
		if (tls_ready && append_file(extra, 1) < 0)
			tls_ready = 0;
	}
	curl_easy_cleanup(h);
	hangar_buf_dispose(&e2b_ca);
	if (!tls_ready) {
		free(ca_bundle);
		ca_bundle = NULL;
		ca_bundle_len = 0;
	}
}

int up_connect_tls(struct up *u, const char *hostport, int timeout_ms, char *err, size_t errcap)
{
	char url[320], errbuf[CURL_ERROR_SIZE] = "";
	curl_socket_t sock = CURL_SOCKET_BAD;
	CURLcode cc;
	CURL *h;

	u->fd = -1;
	u->tls = NULL;
	pthread_once(&tls_once, tls_init);
	if (!tls_ready) {
		snprintf(err, errcap, "%s", ca_error);
		return -1;
	}
	if ((size_t)snprintf(url, sizeof(url), "https://%s/", hostport) >= sizeof(url)) {
		snprintf(err, errcap, "the envd URL is too long");
		return -1;
	}
	h = curl_easy_init();
	if (!h) {
		snprintf(err, errcap, "out of memory");
		return -1;
	}
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "https");
	curl_easy_setopt(h, CURLOPT_CONNECT_ONLY, 1L);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long)timeout_ms);
	curl_easy_setopt(h, CURLOPT_TCP_NODELAY, 1L);
	curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
	/* The edge speaks HTTP/1.1 on the connection: ALPN must not offer h2. */
	curl_easy_setopt(h, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
	curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 1L);
	curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 2L);
	if (ca_dir && !ca_bundle)
		curl_easy_setopt(h, CURLOPT_CAINFO, NULL);
	if (ca_bundle) {
		struct curl_blob blob = { .data = ca_bundle, .len = ca_bundle_len, .flags = CURL_BLOB_NOCOPY };
		if (curl_easy_setopt(h, CURLOPT_CAINFO_BLOB, &blob) != CURLE_OK) {
			snprintf(err, errcap, "this libcurl cannot take CA certificates from memory");
			curl_easy_cleanup(h);
			return -1;
		}
	}
	cc = curl_easy_perform(h);
	if (cc == CURLE_OK)
		cc = curl_easy_getinfo(h, CURLINFO_ACTIVESOCKET, &sock);
	if (cc != CURLE_OK || sock == CURL_SOCKET_BAD) {
		snprintf(err, errcap, "%s%s%.300s", curl_easy_strerror(cc), errbuf[0] ? ": " : "", errbuf);
		curl_easy_cleanup(h);
		errno = cc == CURLE_OPERATION_TIMEDOUT ? ETIMEDOUT : ECONNREFUSED;
		return -1;
	}
	u->fd = (int)sock;
	u->tls = h;
	return 0;
}

ssize_t up_tls_send(struct up *u, const void *buf, size_t len)
{
	size_t n = 0;
	CURLcode cc = curl_easy_send(u->tls, buf, len, &n);
	if (cc == CURLE_OK)
		return (ssize_t)n;
	errno = cc == CURLE_AGAIN ? EAGAIN : EPIPE;
	return -1;
}

ssize_t up_tls_recv(struct up *u, void *buf, size_t len)
{
	size_t n = 0;
	CURLcode cc = curl_easy_recv(u->tls, buf, len, &n);
	if (cc == CURLE_OK)
		return (ssize_t)n;   /* 0: the peer closed */
	errno = cc == CURLE_AGAIN ? EAGAIN : ECONNRESET;
	return -1;
}

void up_tls_close(struct up *u)
{
	/* libcurl owns the socket: it closes it with the session. */
	curl_easy_cleanup(u->tls);
	u->tls = NULL;
	u->fd = -1;
}
