/*
 * What the local-isolation tests share: a state directory per test, the two
 * callers (root, and the unprivileged test user `user`), a context on that
 * directory, a sandbox, and commands run in it as one of its users.
 *
 * Every test runs in a process of its own (Check forks each), so
 * become_caller() changes the test's uid for good, and setup()/teardown()
 * are the test case's checked fixture: teardown kills whatever sandbox is
 * left in the directory and removes it.
 */
#pragma once

#include <pthread.h>

#include <hangar/hangar.h>

#include "leftovers.h"

/* The test's state directory (HANGAR_STATE_DIR), made by setup(). */
extern char state_dir[64];

/* unprivileged: become `user` for the rest of the test, or return 0 (skip)
 * when that cannot be done (not started as root, no such user, sandboxes
 * from an image). 0: 1. */
int become_caller(int unprivileged);

void setup(void);
void teardown(void);

/* A context on state_dir whose default provider is local. */
hangar_ctx *new_ctx(void);

/* A local sandbox living 120 s, with network on or off, from the template
 * HANGAR_TEST_TEMPLATE names (unset: the host's /usr); the create must work. */
hangar_sandbox *create(hangar_ctx *ctx, int network);

/* The image sandboxes are made from (HANGAR_TEST_TEMPLATE), or NULL: the host's /usr. */
const char *test_image(void);
/*
 * With an image: path in sb, read as its root, is the image's own file
 * (under HANGAR_TEST_IMAGE_ROOT, the image's one layer), or absent as there.
 */
void expect_image_file(hangar_sandbox *sb, const char *path);

struct out {
	int exit_code;
	int oom_killed;
	char text[8192]; /* stdout then stderr */
};

/* Runs cmd as user ("root" or "user") in sb; the exec itself must work. */
void sh(hangar_sandbox *sb, const char *user, const char *cmd, struct out *o);

/* cmd must succeed and print want (its first line). */
void expect(hangar_sandbox *sb, const char *user, const char *cmd, const char *want);

/* A command run as user on a thread of its own (several may run at once on one sandbox). */
struct bg_exec {
	hangar_sandbox *sb;
	const char *cmd;
	struct out o;    /* stdout only; exit_code -1000 when the exec itself failed */
	pthread_t thread;
};

/* Runs b->cmd into b->o: a pthread start routine, or called directly. Asserts nothing. */
void *bg_exec_run(void *arg);
