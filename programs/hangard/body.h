/*
 * Checks of what enters as text (body.c): the request target and JSON
 * bodies. Messages are valid UTF-8 and name what is wrong.
 */
#ifndef HANGARD_BODY_H
#define HANGARD_BODY_H

#include <stddef.h>

#include <cjson/cJSON.h>

/* How deep a request body may nest objects and arrays. */
#define BODY_MAX_DEPTH 16

/*
 * The raw request target ("/path?k=v&..."), before libmicrohttpd decodes it:
 * 0 when the path and every query name and value decode to valid UTF-8
 * without NUL, else -1 with the reason in err.
 */
int target_check(const char *target, char *err, size_t errlen);

/*
 * A request body: a strict JSON object whose members are all in allowed
 * (NULL-terminated); an empty body is {}. NULL with the reason in err.
 */
cJSON *body_decode(const char *body, size_t len, const char *const *allowed, char *err, size_t errlen);

#endif
