/*
 * One table from the library's error kinds to HTTP statuses. Every code of
 * hangar/errors.h has a row; tests/hangard checks the table against the
 * header, so a new code cannot reach clients as a silent 500.
 */
#include <stdio.h>

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
	{ HANGAR_ECANCELED, 503 },    /* only the server cancels: it is stopping */
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
