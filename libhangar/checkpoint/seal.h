/*
 * Sealing checkpoint streams: libsodium's secretstream (XChaCha20-Poly1305)
 * in 64 KiB chunks, under a key derived from the secret key, bound to one
 * checkpoint and one session.
 *
 * Layout of a sealed stream:
 *   "HNGCKPT" 0x01                      8 bytes, format and version
 *   secretstream header                 24 bytes
 *   binding chunk                       17 bytes: no plaintext, the associated
 *                                       data is the magic, checkpoint id and
 *                                       session id; it authenticates only under
 *                                       the right key for the right checkpoint
 *   data chunks                         65536 + 17 bytes each, the last one
 *                                       shorter (or full) and tagged FINAL
 * Every chunk but the last is full, so a stream needs no length fields: a
 * short chunk must be the final one, and a stream that ends without a FINAL
 * chunk is truncated. Any failure is HANGAR_EREFUSED.
 */
#pragma once

#include <sodium.h>
#include <stddef.h>

#include "core/internal.h"

#define SEAL_CHUNK 65536
#define SEAL_KEYBYTES crypto_secretstream_xchacha20poly1305_KEYBYTES
/* The current key and up to 8 previous ones. */
#define SEAL_MAX_KEYS 9

/* Keys to seal with (the first) and to open with (any). */
struct seal_keyring {
	int n;
	unsigned char key[SEAL_MAX_KEYS][SEAL_KEYBYTES];
};

/* Derives a sealing key from a secret string and appends it. HANGAR_EINVAL when full. */
int seal_keyring_add(struct seal_keyring *kr, const char *secret, size_t len);
/* The context's keys: HANGAR_SECRET_KEY (or, unset, the key generated once in
 * the state directory) first, then each of HANGAR_SECRET_KEY_PREVIOUS. */
int seal_keyring_load(struct seal_keyring *kr, hangar_ctx *ctx);
void seal_keyring_wipe(struct seal_keyring *kr);

/* Where sealed or opened bytes go. Returns 0 or a negative code (herr set). */
typedef int (*seal_sink)(void *payload, const void *data, size_t len);

/* A writer seals everything written to it and hands the sealed bytes to sink. */
struct seal_writer;
int seal_writer_new(struct seal_writer **out, const struct seal_keyring *kr, const char *checkpoint_id,
		    const char *session_id, seal_sink sink, void *payload);
int seal_writer_write(struct seal_writer *w, const void *data, size_t len);
/* Seals the last chunk (FINAL). Nothing may be written afterwards. */
int seal_writer_finish(struct seal_writer *w);
void seal_writer_free(struct seal_writer *w);

/* A reader is fed sealed bytes and hands sink only plaintext that authenticated,
 * chunk by chunk. After an error it refuses everything with the same code. */
struct seal_reader;
int seal_reader_new(struct seal_reader **out, const struct seal_keyring *kr, const char *checkpoint_id,
		    const char *session_id, seal_sink sink, void *payload);
int seal_reader_feed(struct seal_reader *r, const void *data, size_t len);
/* The end of the sealed bytes: 0 only when the FINAL chunk was seen. */
int seal_reader_finish(struct seal_reader *r);
void seal_reader_free(struct seal_reader *r);

/* The secret key file generated in the state directory when HANGAR_SECRET_KEY is unset. */
#define SEAL_KEY_FILE "secret.key"
