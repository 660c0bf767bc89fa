/*
 * Pieces of the hostile HTTP servers the C tests run on loopback: they speak
 * raw bytes on purpose, so that a test can send answers no real server would.
 */
#pragma once

#include <stddef.h>

/* Sends all of data; -1 when the peer has gone. */
int rawhttp_send_all(int fd, const void *data, size_t len);
int rawhttp_send_str(int fd, const char *s);

/*
 * Reads one request: its head, then a Content-Length body, which is
 * discarded. The head (without the blank line) goes to head when it is not
 * NULL, cut to cap - 1 bytes. -1 when the client hung up or the head does
 * not fit in 64 KiB.
 */
int rawhttp_read_request(int fd, char *head, size_t cap);

/* Discards what the client sends until it hangs up or stop_fd is readable. */
void rawhttp_wait_for_close(int fd, int stop_fd);
