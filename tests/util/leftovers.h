/* For the suites' teardowns: what a failed test left running. */
#pragma once

#include <hangar/hangar.h>

/*
 * Where state_dir's running local sandboxes have their directories: the
 * target of state_dir/local/run (a runtime directory on a tmpfs), else
 * state_dir/local. In one of four static buffers, in turn: up to four
 * calls may be the arguments of one call.
 */
const char *run_of(const char *state_dir);

/* Removes state_dir's runtime directory (the target of state_dir/local/run), if it has one. */
void remove_run_dir(const char *state_dir);

/*
 * For a teardown, before state_dir goes: kills, through ctx, every local
 * sandbox whose directory is in run_of(state_dir), then removes state_dir's
 * runtime directory (remove_run_dir).
 */
void kill_local_leftovers(hangar_ctx *ctx, const char *state_dir);

/*
 * A context (no settings from the environment) on state_dir, with
 * HANGAR_ENVD_PATH and HANGAR_JAIL_PATH from the environment, to kill
 * leftovers through; NULL when it cannot be made.
 */
hangar_ctx *leftovers_ctx(const char *state_dir);

/*
 * For a checked fixture's setup. Check's fork mode ends a test's process
 * at its first failed assertion (_exit), without the teardown: this forks
 * a watcher that waits for the calling process to end, however it ends,
 * then kills every local sandbox left in state_dir (kill_local_leftovers,
 * with HANGAR_ENVD_PATH and HANGAR_JAIL_PATH from the environment) and
 * removes remove (when it is still there). A passing test's teardown has
 * done both already, and the watcher finds nothing.
 */
void leftovers_watch(const char *state_dir, const char *remove);

/* The pid of pid's child named comm (its /proc children and comm files), or 0. */
int proc_child_named(int pid, const char *comm);
