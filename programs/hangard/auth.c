/*
 * Bearer tokens. The tokens file holds one entry a line:
 *
 *   NAME SCOPES HASH
 *
 * SCOPES is a comma list of read, write, sandboxes and admin (admin grants
 * all; sandboxes is the E2B-compatible API under /e2b, and nothing else);
 * HASH is "blake2b:" and the hex BLAKE2b-256 of the token, so the file
 * never holds a token in clear. A presented token is hashed and compared
 * with every entry, each comparison over the fixed-length hashes in
 * constant time, and every entry compared whatever matched first: neither
 * timing nor the order of the file tells a caller how close a guess was.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sodium.h>

#include "hangard.h"

#define HASH_BYTES crypto_generichash_BYTES  /* 32 */
#define HASH_PREFIX "blake2b:"
/* The longest token accepted: longer ones are refused before hashing. */
#define TOKEN_MAX 4096

struct token {
	char name[65];
	unsigned scopes;
	unsigned char hash[HASH_BYTES];
	/* The request-rate bucket (HANGARD_TOKEN_RATE): credit and its time. */
	double credit;
	int64_t credit_at_us;
};

struct tokens {
	struct token *v;
	size_t n;
	pthread_mutex_t rate_lock;
};

static void hash_token(unsigned char out[HASH_BYTES], const char *tok, size_t len)
{
	crypto_generichash(out, HASH_BYTES, (const unsigned char *)tok, len, NULL, 0);
}

static int parse_scopes(const char *s, unsigned *out)
{
	*out = 0;
	while (*s) {
		size_t n = strcspn(s, ",");
		if (n == 4 && strncmp(s, "read", 4) == 0)
			*out |= SCOPE_READ;
		else if (n == 5 && strncmp(s, "write", 5) == 0)
			*out |= SCOPE_WRITE;
		else if (n == 5 && strncmp(s, "admin", 5) == 0)
			*out |= SCOPE_ADMIN;
		else if (n == 9 && strncmp(s, "sandboxes", 9) == 0)
			*out |= SCOPE_SANDBOXES;
		else
			return -1;
		s += n;
		if (*s == ',')
			s++;
	}
	return *out ? 0 : -1;
}

static int valid_name(const char *s)
{
	size_t n = strlen(s);
	if (n == 0 || n > 64)
		return 0;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
		      *s == '-' || *s == '_' || *s == '.'))
			return 0;
	return 1;
}

struct tokens *tokens_load(const char *path)
{
	FILE *f = fopen(path, "re");
	struct tokens *t;
	char line[1024];
	unsigned lineno = 0;

	if (!f) {
		fprintf(stderr, "hangard: cannot read the tokens file %s: %s\n", path, strerror(errno));
		return NULL;
	}
	t = calloc(1, sizeof(*t));
	if (!t)
		goto fail;
	pthread_mutex_init(&t->rate_lock, NULL);
	while (fgets(line, sizeof(line), f)) {
		char name[128], scopes[128], hash[128], extra[2];
		size_t hl;
		struct token *nv;

		lineno++;
		if (!strchr(line, '\n') && !feof(f)) {
			fprintf(stderr, "hangard: %s:%u: line too long\n", path, lineno);
			goto fail;
		}
		char *p = line + strspn(line, " \t");
		if (*p == '#' || *p == '\n' || *p == '\0')
			continue;
		if (sscanf(p, "%127s %127s %127s %1s", name, scopes, hash, extra) != 3) {
			fprintf(stderr, "hangard: %s:%u: expected NAME SCOPES HASH\n", path, lineno);
			goto fail;
		}
		nv = realloc(t->v, (t->n + 1) * sizeof(*t->v));
		if (!nv)
			goto fail;
		t->v = nv;
		struct token *e = &t->v[t->n];
		memset(e, 0, sizeof(*e));
		if (!valid_name(name)) {
			fprintf(stderr, "hangard: %s:%u: a name is 1 to 64 of [A-Za-z0-9._-]\n", path, lineno);
			goto fail;
		}
		memcpy(e->name, name, strlen(name) + 1);
		if (parse_scopes(scopes, &e->scopes) < 0) {
			fprintf(stderr, "hangard: %s:%u: scopes are a comma list of read, write, sandboxes, admin\n", path,
				lineno);
			goto fail;
		}
		if (strncmp(hash, HASH_PREFIX, strlen(HASH_PREFIX)) != 0 ||
		    sodium_hex2bin(e->hash, sizeof(e->hash), hash + strlen(HASH_PREFIX),
				   strlen(hash + strlen(HASH_PREFIX)), NULL, &hl, NULL) != 0 ||
		    hl != HASH_BYTES || strlen(hash + strlen(HASH_PREFIX)) != 2 * HASH_BYTES) {
			fprintf(stderr, "hangard: %s:%u: the hash is blake2b: and 64 hex digits (hangard hash-token)\n",
				path, lineno);
			goto fail;
		}
		for (size_t i = 0; i < t->n; i++)
			if (strcmp(t->v[i].name, e->name) == 0) {
				fprintf(stderr, "hangard: %s:%u: the name %s is taken\n", path, lineno, e->name);
				goto fail;
			}
		t->n++;
	}
	fclose(f);
	return t;
fail:
	fclose(f);
	tokens_free(t);
	return NULL;
}

void tokens_free(struct tokens *t)
{
	if (!t)
		return;
	sodium_memzero(t->v, t->n * sizeof(*t->v));
	free(t->v);
	pthread_mutex_destroy(&t->rate_lock);
	free(t);
}

const struct token *tokens_find(const struct tokens *t, const char *presented)
{
	unsigned char h[HASH_BYTES];
	const struct token *found = NULL;
	size_t len;

	if (!t || !presented)
		return NULL;
	len = strnlen(presented, TOKEN_MAX + 1);
	if (len == 0 || len > TOKEN_MAX)
		return NULL;
	hash_token(h, presented, len);
	for (size_t i = 0; i < t->n; i++) {
		/* No early exit: every entry costs the same. */
		int same = sodium_memcmp(h, t->v[i].hash, HASH_BYTES) == 0;
		if (same && !found)
			found = &t->v[i];
	}
	sodium_memzero(h, sizeof(h));
	return found;
}

int tokens_admit(struct tokens *t, const struct token *tok, double rate, double burst, unsigned *retry_s)
{
	struct token *e = &t->v[tok - t->v];
	int64_t now = clock_mono_us();
	int ok;

	if (rate <= 0)
		return 1;
	pthread_mutex_lock(&t->rate_lock);
	if (e->credit_at_us == 0)
		e->credit = burst;
	else
		e->credit += (double)(now - e->credit_at_us) / 1e6 * rate;
	if (e->credit > burst)
		e->credit = burst;
	e->credit_at_us = now;
	ok = e->credit >= 1;
	if (ok)
		e->credit -= 1;
	else
		*retry_s = (unsigned)((1 - e->credit) / rate) + 1;
	pthread_mutex_unlock(&t->rate_lock);
	return ok;
}

const char *token_name(const struct token *tok)
{
	return tok->name;
}

int token_allows(const struct token *tok, unsigned scope)
{
	if (tok->scopes & SCOPE_ADMIN)
		return 1;
	return (tok->scopes & scope) == scope;
}

int tokens_hash_main(int argc, char **argv)
{
	char buf[TOKEN_MAX + 2];
	unsigned char h[HASH_BYTES];
	char hex[2 * HASH_BYTES + 1];
	const char *name = argc > 2 ? argv[2] : "NAME";
	const char *scopes = argc > 3 ? argv[3] : "read";
	unsigned sc;
	size_t n = 0;

	if (argc > 4 || (argc > 2 && !valid_name(name)) || parse_scopes(scopes, &sc) < 0) {
		fprintf(stderr, "usage: hangard hash-token [NAME [SCOPES]] < token\n"
				"  NAME: 1 to 64 of [A-Za-z0-9._-]; SCOPES: comma list of read, write, sandboxes, admin\n");
		return 2;
	}
	for (;;) {
		ssize_t r = read(0, buf + n, sizeof(buf) - 1 - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			perror("hangard: stdin");
			return 1;
		}
		if (r == 0)
			break;
		n += (size_t)r;
		if (n >= sizeof(buf) - 1)
			break;
	}
	while (n && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
		n--;
	if (n == 0 || n > TOKEN_MAX || memchr(buf, '\0', n) || memchr(buf, '\n', n) || memchr(buf, ' ', n)) {
		fprintf(stderr, "hangard: a token is 1 to %d bytes on one line, without spaces\n", TOKEN_MAX);
		sodium_memzero(buf, sizeof(buf));
		return 1;
	}
	hash_token(h, buf, n);
	sodium_memzero(buf, sizeof(buf));
	sodium_bin2hex(hex, sizeof(hex), h, sizeof(h));
	printf("%s %s " HASH_PREFIX "%s\n", name, scopes, hex);
	return 0;
}
