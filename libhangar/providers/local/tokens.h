/*
 * envd's token of each live jail a local provider has met, so that
 * attaching again (what a server does on every request) costs no round
 * trip to the jail (tokens.c).
 *
 * An entry is keyed by the sandbox's id and its jail's pid, and the caller
 * recalls one only after it has just proved that pid to be that id's jail
 * (local_liveness() in state.c): ids are random and a sandbox directory is
 * never made twice, so one id names one jail ever, and a jail keeps its
 * token for its whole life. Entries are wiped when they are dropped.
 */
#pragma once

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "lstate.h"

#define LTOKENS_SLOTS 64   /* the least recently used makes way */
#define LTOKENS_MAX 1024   /* longer tokens are not kept */

struct ltokens {
	pthread_mutex_t mu;
	uint64_t clock;
	struct {
		char id[LSTATE_ID_LEN + 1];
		int pid;
		uint64_t used;
		char *token;
	} slot[LTOKENS_SLOTS];
};

void ltokens_init(struct ltokens *t);
/* Wipes and frees every entry. */
void ltokens_fini(struct ltokens *t);
/* Copies the token kept for (id, pid) into buf; 0, or -1 when none is kept or it does not fit. */
int ltokens_recall(struct ltokens *t, const char *id, int pid, char *buf, size_t size);
/* Keeps token for (id, pid), in place of id's older entry or the least recently used one. */
void ltokens_keep(struct ltokens *t, const char *id, int pid, const char *token);
/* Drops id's entry: its jail is gone or going. */
void ltokens_forget(struct ltokens *t, const char *id);
