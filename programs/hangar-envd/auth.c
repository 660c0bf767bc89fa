/*
 * Who may call the daemon, as envd decides it: the X-Access-Token header,
 * compared in constant time, and for /files, which a client may reach with a
 * signed URL instead of the header, the v1 signature and its expiry.
 */
#include "envd.h"
#include "request.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/*
 * The token can be replaced once while requests are being served (a local
 * sandbox taken from the warm pool): every read of envd_cfg.token after
 * start-up holds this lock.
 */
static pthread_mutex_t token_mu = PTHREAD_MUTEX_INITIALIZER;
static int token_rotated;

int envd_token_ok(const char *presented)
{
	size_t tlen, plen;
	unsigned char digest_a[crypto_hash_sha256_BYTES], digest_b[crypto_hash_sha256_BYTES];
	int open_daemon;

	if (!presented) {
		pthread_mutex_lock(&token_mu);
		open_daemon = envd_cfg.token == NULL;
		pthread_mutex_unlock(&token_mu);
		return open_daemon;
	}
	plen = strlen(presented);
	crypto_hash_sha256(digest_b, (const unsigned char *)presented, plen);
	pthread_mutex_lock(&token_mu);
	open_daemon = envd_cfg.token == NULL;
	if (!open_daemon) {
		tlen = strlen(envd_cfg.token);
		/* Compare digests so neither the content nor the length leaks through timing. */
		crypto_hash_sha256(digest_a, (const unsigned char *)envd_cfg.token, tlen);
	}
	pthread_mutex_unlock(&token_mu);
	return open_daemon || sodium_memcmp(digest_a, digest_b, sizeof(digest_a)) == 0;
}

int envd_token_rotate(const char *fresh)
{
	size_t n = fresh ? strlen(fresh) : 0;
	char *copy;
	int rc = 0;

	if (n == 0 || n > ENVD_TOKEN_MAX)
		return -EINVAL;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)fresh[i] <= 0x20 || fresh[i] == 0x7f)
			return -EINVAL;
	copy = strdup(fresh);
	if (!copy)
		return -ENOMEM;
	pthread_mutex_lock(&token_mu);
	if (!envd_cfg.token || token_rotated) {
		rc = envd_cfg.token ? -EALREADY : -EPERM;
	} else {
		explicit_bzero(envd_cfg.token, strlen(envd_cfg.token));
		free(envd_cfg.token);
		envd_cfg.token = copy;
		copy = NULL;
		token_rotated = 1;
	}
	pthread_mutex_unlock(&token_mu);
	if (copy) {
		explicit_bzero(copy, n);
		free(copy);
	}
	return rc;
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
	int open_daemon;

	pthread_mutex_lock(&token_mu);
	open_daemon = envd_cfg.token == NULL;
	pthread_mutex_unlock(&token_mu);
	if (open_daemon)
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
	pthread_mutex_lock(&token_mu);
	envd_files_signature(envd_req_query(r, "path"), op, envd_req_query(r, "username"), envd_cfg.token,
			     exp, want);
	pthread_mutex_unlock(&token_mu);
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
