/* The local provider's memory of envd tokens (tokens.h). */
#define _GNU_SOURCE
#include "tokens.h"

#include <stdlib.h>
#include <string.h>

static void drop(struct ltokens *t, size_t i)
{
	if (t->slot[i].token) {
		explicit_bzero(t->slot[i].token, strlen(t->slot[i].token));
		free(t->slot[i].token);
	}
	memset(&t->slot[i], 0, sizeof(t->slot[i]));
}

void ltokens_init(struct ltokens *t)
{
	memset(t, 0, sizeof(*t));
	pthread_mutex_init(&t->mu, NULL);
}

void ltokens_fini(struct ltokens *t)
{
	for (size_t i = 0; i < LTOKENS_SLOTS; i++)
		drop(t, i);
	pthread_mutex_destroy(&t->mu);
}

int ltokens_recall(struct ltokens *t, const char *id, int pid, char *buf, size_t size)
{
	int rc = -1;

	pthread_mutex_lock(&t->mu);
	for (size_t i = 0; i < LTOKENS_SLOTS; i++) {
		size_t n;

		if (!t->slot[i].token || t->slot[i].pid != pid || strcmp(t->slot[i].id, id) != 0)
			continue;
		n = strlen(t->slot[i].token);
		if (n < size) {
			memcpy(buf, t->slot[i].token, n + 1);
			t->slot[i].used = ++t->clock;
			rc = 0;
		}
		break;
	}
	pthread_mutex_unlock(&t->mu);
	return rc;
}

void ltokens_keep(struct ltokens *t, const char *id, int pid, const char *token)
{
	size_t pick = 0;
	char *copy;

	if (pid <= 0 || strlen(id) > LSTATE_ID_LEN || strlen(token) > LTOKENS_MAX || !(copy = strdup(token)))
		return;
	pthread_mutex_lock(&t->mu);
	for (size_t i = 0; i < LTOKENS_SLOTS; i++) {
		if (t->slot[i].token && strcmp(t->slot[i].id, id) == 0) {
			pick = i; /* id's own entry: never two for one id */
			break;
		}
		if (!t->slot[i].token) {
			if (t->slot[pick].token)
				pick = i;
		} else if (t->slot[pick].token && t->slot[i].used < t->slot[pick].used) {
			pick = i;
		}
	}
	drop(t, pick);
	memcpy(t->slot[pick].id, id, strlen(id) + 1);
	t->slot[pick].pid = pid;
	t->slot[pick].token = copy;
	t->slot[pick].used = ++t->clock;
	pthread_mutex_unlock(&t->mu);
}

void ltokens_forget(struct ltokens *t, const char *id)
{
	pthread_mutex_lock(&t->mu);
	for (size_t i = 0; i < LTOKENS_SLOTS; i++)
		if (t->slot[i].token && strcmp(t->slot[i].id, id) == 0)
			drop(t, i);
	pthread_mutex_unlock(&t->mu);
}
