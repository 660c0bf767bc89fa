/*
 * A provider for tests: every sandbox is a real hangar-envd process on a unix
 * socket (no jail), and faults can be injected: the daemon killed or stopped
 * behind the library's back, create and list failing with a chosen code.
 * With envd_url set, a sandbox is only that URL (a server the test runs):
 * "killing" it behind the library's back is setting killed.
 */
#pragma once

#include <hangar/hangar.h>
#include <hangar/sys/provider.h>
#include <sys/types.h>

struct fake_box {
	char id[32];
	char sock[200];
	char url[64];
	pid_t pid;                  /* 0: no daemon (envd_url) */
	int paused;
	int killed;
	struct fake_box *next;
};

struct fake {
	char dir[128];
	const char *envd;           /* the daemon binary */
	const char *envd_url;       /* when set, sandboxes are this (test-run) envd URL, no daemon */
	int create_fails;           /* a HANGAR_E* code to fail create with, or 0 */
	int list_fails;
	int next_id;
	struct fake_box *boxes;
};

/* Registers provider "fake" on ctx with state f (which must outlive ctx). */
int fake_register(hangar_ctx *ctx, struct fake *f);
struct fake_box *fake_find(struct fake *f, const char *id);
/* The fake's table, for tests that build other tables from its slots (data: a struct fake). */
const struct hangar_provider_ops *fake_ops(void);
/* Tears every remaining daemon down. */
void fake_cleanup(struct fake *f);
