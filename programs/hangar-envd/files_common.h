/*
 * What the /files download (files_download.c) and upload (files_upload.c)
 * share, in files_common.c. Private to those two.
 */
#pragma once

#include <stddef.h>
#include <sys/stat.h>
#include <sys/types.h>

/* open(2) with the calling thread's credentials, never through a /proc magic link where openat2 exists. */
int open_no_magic(const char *path, int flags, mode_t mode);
/* What a non-regular file is ("a FIFO", ...), for messages. */
const char *file_kind(mode_t m);
/* 0 when path may be streamed (st, and fd's file system when fd >= 0); else the status, msg set. */
unsigned refuse_kind(const char *path, const struct stat *st, int fd, char *msg, size_t msgsz);
/* The last element of path into out, as Go's filepath.Base ("." for ""). */
void base_name(const char *path, char *out, size_t outsz);
