/*
 * What the /files download (files_download.c) and upload (files_upload.c)
 * share (files_common.c): whom a transfer acts for, and which files it may
 * open. Private to those two.
 */
#pragma once

#include <stddef.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "creds.h"
#include "envd.h"
#include "request.h"

/* ?username of r, else the daemon's default user; NULL when there is neither. */
const char *files_username(const struct envd_req *r);
/* Looks name up into *u: 0, else 400 (name NULL) or 401 (unknown user) with msg set. */
unsigned files_lookup_user(const char *name, struct envd_user *u, char *msg, size_t msgsz);
/* envd_creds_enter(u, creds): 0 (leave with envd_creds_leave), else 403 or 500 with msg set. */
unsigned files_act_as(const struct envd_user *u, struct envd_creds *creds, char *msg, size_t msgsz);

/* open(2) with the calling thread's credentials, never through a /proc magic link
 * where the kernel has openat2. */
int files_open_no_magic(const char *path, int flags, mode_t mode);
/* What a non-regular file is ("a FIFO", ...), for messages. */
const char *files_kind_name(mode_t m);
/* 0 when path may be streamed (st, and fd's file system when fd >= 0); else 400 with msg set. */
unsigned files_refuse_kind(const char *path, const struct stat *st, int fd, char *msg, size_t msgsz);
