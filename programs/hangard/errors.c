/*
 * One table from the library's error kinds to HTTP statuses. Every code of
 * hangar/errors.h has a row; tests/hangard checks the table against the
 * header, so a new code cannot reach clients as a silent 500.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>

#include "hangard.h"

static const struct {
	int code;
	unsigned status;
} error_table[] = {
	{ HANGAR_EINVAL, 400 },       /* the request is wrong */
	{ HANGAR_ENOMEM, 500 },
	{ HANGAR_ECONFIG, 500 },      /* the server's settings are wrong */
	{ HANGAR_EUNAVAILABLE, 503 }, /* with Retry-After */
	{ HANGAR_ECAPACITY, 503 },    /* with Retry-After */
	{ HANGAR_ECREATE, 502 },      /* the provider failed to make it */
	{ HANGAR_EGONE, 410 },        /* the sandbox is gone (or never was) */
	{ HANGAR_EPAUSED, 409 },      /* resume it first */
	{ HANGAR_EFILE, 404 },        /* the file is missing or not a file */
	{ HANGAR_ETOOLARGE, 413 },
	{ HANGAR_ETIMEOUT, 504 },
	{ HANGAR_EREFUSED, 403 },
	{ HANGAR_EUNSUPPORTED, 501 }, /* the provider cannot */
	{ HANGAR_EPROTOCOL, 502 },    /* the other side answered nonsense */
	{ HANGAR_ENOTFOUND, 404 },
	{ HANGAR_EOS, 500 },
	{ HANGAR_EEXISTS, 409 },
	{ HANGAR_ECANCELED, 503 },    /* the server is stopping (a client that left: 499) */
	{ HANGAR_EBUSY, 409 },        /* with Retry-After: another caller holds the session */
};

unsigned error_status(int code)
{
	for (size_t i = 0; i < sizeof(error_table) / sizeof(error_table[0]); i++)
		if (error_table[i].code == code)
			return error_table[i].status;
	return 500;
}

/* For `hangard errors`: the table, one "CODE NAME STATUS" line each. */
void errors_print(void);
void errors_print(void)
{
	for (size_t i = 0; i < sizeof(error_table) / sizeof(error_table[0]); i++)
		printf("%d %s %u\n", error_table[i].code, hangar_error_name(error_table[i].code),
		       error_table[i].status);
}

/*
 * Where a library message would show how the state store is reached: libpq
 * words its failures with the server's host, port, socket and database
 * ("connection to server at "db" (10.0.0.5), port 5432 failed"), and a
 * connection string may carry a user and a password. Clients get none of
 * it, whichever request failed.
 */
static const char *const store_markers[] = {
	"postgres://", "postgresql://", "host=", "hostaddr=", "port=", "dbname=", "user=", "password=",
	"connection to server", "server at", ".s.PGSQL", "Is the server running", "database \"", "role \"",
};

const char *error_public_message(const char *msg, char *buf, size_t cap)
{
	for (size_t i = 0; i < sizeof(store_markers) / sizeof(store_markers[0]); i++)
		if (strcasestr(msg, store_markers[i])) {
			snprintf(buf, cap, "the state store failed (its address and error stay in the server)");
			return buf;
		}
	return msg;
}
