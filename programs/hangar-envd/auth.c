/*
 * Who may call the daemon, as envd decides it: the X-Access-Token header,
 * compared in constant time, and for /files, which a client may reach with a
 * signed URL instead of the header, the v1 signature and its expiry.
 */
#include "envd.h"
#include "request.h"

#include <errno.h>
#include <inttypes.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int envd_token_ok(const char *presented)
{
	size_t tlen, plen;
	unsigned char digest_a[crypto_hash_sha256_BYTES], digest_b[crypto_hash_sha256_BYTES];

	if (!envd_cfg.token)
		return 1;
	if (!presented)
		return 0;
	tlen = strlen(envd_cfg.token);
	plen = strlen(presented);
	/* Compare digests so neither the content nor the length leaks through timing. */
	crypto_hash_sha256(digest_a, (const unsigned char *)envd_cfg.token, tlen);
	crypto_hash_sha256(digest_b, (const unsigned char *)presented, plen);
	return sodium_memcmp(digest_a, digest_b, sizeof(digest_a)) == 0;
}

void envd_files_signature(const char *path, const char *op, const char *user, const char *token,
			  int64_t expiration, char out[48])
{
	crypto_hash_sha256_state st;
	unsigned char digest[crypto_hash_sha256_BYTES];
	char exp[24];

	crypto_hash_sha256_init(&st);
#define PART(s) crypto_hash_sha256_update(&st, (const unsigned char *)(s), strlen(s))
	PART(path ? path : "");
	PART(":");
	PART(op);
	PART(":");
	PART(user ? user : "");
	PART(":");
	PART(token ? token : "");
	if (expiration >= 0) {
		snprintf(exp, sizeof(exp), ":%" PRId64, expiration);
		PART(exp);
	}
#undef PART
	crypto_hash_sha256_final(&st, digest);
	memcpy(out, "v1_", 3);
	sodium_bin2base64(out + 3, 48 - 3, digest, sizeof(digest), sodium_base64_VARIANT_ORIGINAL_NO_PADDING);
}

int envd_files_authorize(const struct envd_req *r, const char *op, char *msg, size_t msgsz)
{
	const char *hdr, *sig, *exp_s;
	int64_t exp = -1;
	char want[48];

	if (!envd_cfg.token)
		return 0;
	hdr = envd_req_header(r, "X-Access-Token");
	if (hdr) {
		if (envd_token_ok(hdr))
			return 0;
		snprintf(msg, msgsz, "access token present in header but does not match");
		return 401;
	}
	sig = envd_req_query(r, "signature");
	if (!sig) {
		snprintf(msg, msgsz, "missing signature query parameter");
		return 401;
	}
	exp_s = envd_req_query(r, "signature_expiration");
	if (exp_s) {
		char *end;
		long long v;

		errno = 0;
		v = strtoll(exp_s, &end, 10);
		if (errno || end == exp_s || *end) {
			snprintf(msg, msgsz, "invalid format for parameter signature_expiration");
			return 400;
		}
		exp = v;
	}
	envd_files_signature(envd_req_query(r, "path"), op, envd_req_query(r, "username"), envd_cfg.token,
			     exp, want);
	if (strlen(sig) != strlen(want) || sodium_memcmp(sig, want, strlen(want)) != 0) {
		snprintf(msg, msgsz, "invalid signature");
		return 401;
	}
	if (exp >= 0 && exp < (int64_t)time(NULL)) {
		snprintf(msg, msgsz, "signature is already expired");
		return 401;
	}
	return 0;
}
