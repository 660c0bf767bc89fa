/*
 * Which sandbox and port a request of the edge is for, and whether it may
 * reach them: E2B's host names (PORT-ID.DOMAIN) or headers (E2b-Sandbox-Id,
 * E2b-Sandbox-Port), and the token /e2b issued for that sandbox, checked
 * before anything is forwarded (e2b-edge.c).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <microhttpd.h>
#include <sodium.h>

#include "e2b-edge.h"
#include "e2b.h"

/* ---- answers of the edge itself, in E2B's shapes ---- */

/* Connect's RPCs (the SDK's processes and filesystem) read Connect's error
 * body; envd's plain routes E2B's {code, message}. */
static int is_rpc(const char *url)
{
	return strncmp(url, "/process.Process/", 17) == 0 || strncmp(url, "/filesystem.Filesystem/", 23) == 0;
}

void edge_reply(struct request *r, const char *url, unsigned status, const char *msg)
{
	cJSON *doc;
	if (url && is_rpc(url)) {
		doc = cJSON_CreateObject();
		cJSON_AddStringToObject(doc, "code", status == 401 ? "unauthenticated"
						  : status == 400 ? "invalid_argument"
						  : status == 501 ? "unimplemented"
						  : status == 500 ? "internal"
								  : "unavailable");
		cJSON_AddStringToObject(doc, "message", msg);
	} else {
		doc = e2b_error_body(status, msg);
	}
	reply_json(r, status, doc);
}

/* ---- routing ---- */

static char *sandbox_domain;

void edge_set_domain(const char *domain)
{
	free(sandbox_domain);
	sandbox_domain = domain && domain[0] ? strdup(domain) : NULL;
}

const char *edge_domain(void)
{
	return sandbox_domain;
}

/* "PORT-ID.DOMAIN[:port]" of the configured domain: 1 with port and id
 * filled, 0 when host is another name (hangard's own), -1 when it is a
 * name of the domain but not of that form. */
static int host_route(const char *host, unsigned *port, char id[65])
{
	size_t hl, dl;
	const char *dot, *p;
	char *end;
	unsigned long v;

	if (!host || !sandbox_domain)
		return 0;
	hl = strcspn(host, ":");
	if (host[0] == '[')
		return 0;
	dl = strlen(sandbox_domain);
	if (hl <= dl + 1 || host[hl - dl - 1] != '.' || strncasecmp(host + hl - dl, sandbox_domain, dl) != 0)
		return 0;
	dot = host + hl - dl - 1;
	p = host;
	if (*p < '0' || *p > '9')
		return -1;
	errno = 0;
	v = strtoul(p, &end, 10);
	if (errno || *end != '-' || v == 0 || v > 65535 || end - p > 5)
		return -1;
	p = end + 1;
	if (dot - p < 1 || dot - p > 64)
		return -1;
	memcpy(id, p, (size_t)(dot - p));
	id[dot - p] = '\0';
	if (!e2b_id_ok(id))
		return -1;
	*port = (unsigned)v;
	return 1;
}

static int header_port(const char *s, unsigned *port)
{
	char *end;
	unsigned long v;
	if (!s || *s < '0' || *s > '9' || strlen(s) > 5)
		return -1;
	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || *end || v == 0 || v > 65535)
		return -1;
	*port = (unsigned)v;
	return 0;
}

/* A token presented against the expected one, in constant time. */
static int token_matches(const char *presented, const char *expected)
{
	char pad[E2B_TOKEN_LEN] = { 0 };
	size_t n = presented ? strlen(presented) : 0;
	/* A token of another length is compared too (with zeros, which no
	 * token is): a refusal takes as long as a match. */
	int same = sodium_memcmp(n == E2B_TOKEN_LEN ? presented : pad, expected, E2B_TOKEN_LEN) == 0;
	return same && n == E2B_TOKEN_LEN;
}

/*
 * A signed file URL (the SDKs' uploadUrl and downloadUrl), which carries no
 * token: "v1_" and the unpadded base64 of SHA-256 over
 * "PATH:OPERATION:USER:TOKEN[:EXPIRY]", made with the token /e2b issued;
 * GET /files reads, POST /files writes. 1 when it is valid and current.
 */
static int signature_matches(struct request *r, const char *url, const char *method, const char *token)
{
	struct MHD_Connection *conn = request_connection(r);
	const char *sig = MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "signature");
	const char *exp = MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "signature_expiration");
	const char *path = MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "path");
	const char *user = MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "username");
	const char *op = strcmp(method, "GET") == 0 ? "read" : strcmp(method, "POST") == 0 ? "write" : NULL;
	crypto_hash_sha256_state st;
	unsigned char digest[crypto_hash_sha256_BYTES];
	char want[48];
	long long expiry = -1;

	if (!sig || !op || strcmp(url, "/files") != 0)
		return 0;
	if (exp) {
		char *end;
		errno = 0;
		expiry = strtoll(exp, &end, 10);
		if (errno || end == exp || *end || expiry < 0 || expiry < (long long)time(NULL))
			return 0;
	}
	crypto_hash_sha256_init(&st);
	const char *parts[] = { path ? path : "", ":", op, ":", user ? user : "", ":", token };
	for (size_t i = 0; i < sizeof(parts) / sizeof(parts[0]); i++)
		crypto_hash_sha256_update(&st, (const unsigned char *)parts[i], strlen(parts[i]));
	if (exp) {
		crypto_hash_sha256_update(&st, (const unsigned char *)":", 1);
		crypto_hash_sha256_update(&st, (const unsigned char *)exp, strlen(exp));
	}
	crypto_hash_sha256_final(&st, digest);
	memcpy(want, "v1_", 3);
	sodium_bin2base64(want + 3, sizeof(want) - 3, digest, sizeof(digest), sodium_base64_VARIANT_ORIGINAL_NO_PADDING);
	return strlen(sig) == strlen(want) && sodium_memcmp(sig, want, strlen(want)) == 0;
}

/* ---- the request's sandbox ---- */

int edge_route(struct request *r, const char *url, const char *method, char id[65], unsigned *port,
	       struct e2b_record *rec)
{
	const char *host = request_header(r, MHD_HTTP_HEADER_HOST);
	const char *hid = request_header(r, "E2b-Sandbox-Id"), *hport = request_header(r, "E2b-Sandbox-Port");
	const char *target = request_target(r);
	char expected[E2B_TOKEN_LEN + 1], traffic[E2B_TOKEN_LEN + 1];
	unsigned hp = 0;
	int by_host, rc;

	id[0] = '\0';
	*port = 0;
	by_host = host_route(host, port, id);
	if (by_host == 0 && !hid && !hport)
		return 0;    /* hangard's own API */
	if (by_host < 0) {
		edge_reply(r, url, 400, "the host names no sandbox: PORT-SANDBOXID.DOMAIN");
		return -1;
	}
	if (hid || hport) {
		if (!hid || !e2b_id_ok(hid)) {
			edge_reply(r, url, 400, "E2b-Sandbox-Id is not a sandbox id (1 to 64 of [A-Za-z0-9_-])");
			return -1;
		}
		if (header_port(hport, &hp) < 0) {
			edge_reply(r, url, 400, "E2b-Sandbox-Port is not a port (1 to 65535)");
			return -1;
		}
		if (by_host == 1 && (strcmp(hid, id) != 0 || hp != *port)) {
			edge_reply(r, url, 400, "the host and the E2b-Sandbox-Id and E2b-Sandbox-Port headers disagree");
			return -1;
		}
		snprintf(id, 65, "%s", hid);
		*port = hp;
	}
	if (!target || target[0] != '/') {
		edge_reply(r, url, 400, "the request target must be a path");
		return -1;
	}
	if (hangard->stopping) {
		edge_reply(r, url, 503, "the server is shutting down");
		return -1;
	}

	/* The token of this sandbox, before anything reaches it. */
	memset(rec, 0, sizeof(*rec));
	e2b_lock();
	rc = e2b_record_get(id, rec);
	e2b_unlock();
	if (rc < 0) {
		edge_reply(r, url, 500, "the sandbox's record cannot be read");
		return -1;
	}
	e2b_tokens(id, rec->generation, expected, traffic);
	const char *presented = request_header(r, *port == EDGE_ENVD_PORT ? "X-Access-Token" : "e2b-traffic-access-token");
	int ok = token_matches(presented, *port == EDGE_ENVD_PORT ? expected : traffic);
	/* Without the header, a signed file URL; envd then gets its own token
	 * as the header, which it takes before any signature. */
	if (!presented && *port == EDGE_ENVD_PORT)
		ok = signature_matches(r, url, method, expected);
	sodium_memzero(expected, sizeof(expected));
	sodium_memzero(traffic, sizeof(traffic));
	if (!ok) {
		e2b_record_dispose(rec);
		edge_reply(r, url, 401,
			   *port == EDGE_ENVD_PORT
				   ? "unauthorized access, please provide a valid access token (X-Access-Token)"
				   : "unauthorized access, please provide a valid traffic access token "
				     "(e2b-traffic-access-token)");
		return -1;
	}
	return 1;
}
