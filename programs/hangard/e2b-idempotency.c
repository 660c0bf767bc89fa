/*
 * Idempotency-Key on /e2b creates: a create retried with the same key by
 * the same token answers the sandbox the first one made instead of making
 * another, as long as this process runs and for a day at most. Keys are
 * kept hashed with the caller's token name, with a hash of the body, so a
 * key reused for another request is refused rather than answered with a
 * sandbox made for something else.
 */
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "e2b.h"

#define IDEM_MAX 4096
#define IDEM_TTL_US (INT64_C(86400) * 1000000)

struct idem {
	unsigned char who[32];   /* BLAKE2b of the token name and the key */
	unsigned char body[32];  /* BLAKE2b of the request body */
	char *id;                /* the sandbox made; NULL while its create runs */
	int64_t at_us;
};

static struct idem table[IDEM_MAX];
static size_t n_table;
static pthread_mutex_t idem_lock = PTHREAD_MUTEX_INITIALIZER;

static void who_of(unsigned char out[32], const char *caller, const char *key)
{
	crypto_generichash_state st;
	crypto_generichash_init(&st, NULL, 0, 32);
	crypto_generichash_update(&st, (const unsigned char *)caller, strlen(caller) + 1);
	crypto_generichash_update(&st, (const unsigned char *)key, strlen(key));
	crypto_generichash_final(&st, out, 32);
}

static void drop(size_t i)
{
	free(table[i].id);
	table[i] = table[--n_table];
	memset(&table[n_table], 0, sizeof(table[n_table]));
}

static struct idem *find(const unsigned char who[32])
{
	for (size_t i = 0; i < n_table; i++)
		if (sodium_memcmp(table[i].who, who, 32) == 0)
			return &table[i];
	return NULL;
}

int e2b_idem_begin(const char *caller, const char *key, const void *body, size_t len, char **id)
{
	unsigned char who[32], hash[32];
	int64_t now = clock_mono_us();
	struct idem *e;
	int rc = 0;

	*id = NULL;
	who_of(who, caller, key);
	crypto_generichash(hash, sizeof(hash), body, len, NULL, 0);
	pthread_mutex_lock(&idem_lock);
	for (size_t i = n_table; i-- > 0;)
		if (now - table[i].at_us > IDEM_TTL_US && table[i].id)
			drop(i);
	if ((e = find(who)) != NULL) {
		if (sodium_memcmp(e->body, hash, 32) != 0)
			rc = E2B_IDEM_OTHER_BODY;
		else if (!e->id)
			rc = E2B_IDEM_RUNNING;
		else if (!(*id = strdup(e->id)))
			rc = E2B_IDEM_FULL;
		else
			rc = E2B_IDEM_DONE;
		goto out;
	}
	if (n_table == IDEM_MAX) {
		/* Full: the oldest finished entry goes. */
		size_t old = SIZE_MAX;
		for (size_t i = 0; i < n_table; i++)
			if (table[i].id && (old == SIZE_MAX || table[i].at_us < table[old].at_us))
				old = i;
		if (old == SIZE_MAX) {
			rc = E2B_IDEM_FULL;
			goto out;
		}
		drop(old);
	}
	e = &table[n_table++];
	memcpy(e->who, who, 32);
	memcpy(e->body, hash, 32);
	e->id = NULL;
	e->at_us = now;
out:
	pthread_mutex_unlock(&idem_lock);
	return rc;
}

void e2b_idem_finish(const char *caller, const char *key, const char *id)
{
	unsigned char who[32];
	struct idem *e;

	who_of(who, caller, key);
	pthread_mutex_lock(&idem_lock);
	if ((e = find(who)) != NULL && !e->id) {
		if (id && (e->id = strdup(id)) != NULL)
			e->at_us = clock_mono_us();
		else
			drop((size_t)(e - table));
	}
	pthread_mutex_unlock(&idem_lock);
}
