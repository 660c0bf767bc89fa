/* For the suites' teardowns: what a failed test left running. */
#pragma once

#include <hangar/hangar.h>

/* Kills, through ctx, every local sandbox whose directory is in state_dir/local. */
void kill_local_leftovers(hangar_ctx *ctx, const char *state_dir);

/* The pid of pid's child named comm (its /proc children and comm files), or 0. */
int proc_child_named(int pid, const char *comm);
