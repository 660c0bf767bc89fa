/*
 * Strict JSON: a check of the raw bytes before cJSON sees them, and exact
 * integers on the way out.
 *
 * cJSON is lenient where a hostile peer can use it: it keeps the first of
 * two members of one name, stops a string at an escaped NUL, passes invalid
 * UTF-8 through and ignores what follows the value when asked to. The check
 * walks the text once per RFC 8259 and refuses, naming where (a JSON
 * Pointer, RFC 6901):
 *   - bytes that are not UTF-8 (RFC 3629: no overlong forms, no encoded
 *     surrogates, nothing above U+10FFFF), anywhere;
 *   - \u0000 and surrogate escapes that do not pair, in any string;
 *   - two members of one object whose names are equal once unescaped;
 *   - anything but whitespace after the one value;
 *   - nesting deeper than a bound;
 *   - anything else outside the grammar (numbers, literals, controls).
 * Only text that passes is given to cJSON.
 */
#pragma once

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>

/* The nesting bound when the caller passes 0: objects and arrays in each other. */
#define SJSON_DEFAULT_DEPTH 32
/* The highest bound a caller may ask for (the walk recurses once per level). */
#define SJSON_MAX_DEPTH 512

/*
 * Checks text[0..len). Returns 0 when it is one strict JSON value, or -1
 * with a message in err (always NUL-terminated, valid UTF-8, at most
 * errlen - 1 bytes) such as `at /labels: duplicate member "k"`.
 * max_depth 0 means SJSON_DEFAULT_DEPTH; over SJSON_MAX_DEPTH it is lowered.
 */
int sjson_check(const char *text, size_t len, unsigned max_depth, char *err, size_t errlen);

/* sjson_check(), then cJSON. NULL with err set when either refuses. */
cJSON *sjson_parse(const char *text, size_t len, unsigned max_depth, char *err, size_t errlen);

/*
 * 1 when s[0..len) is valid UTF-8 without a NUL byte (text that may enter
 * as an id, a path or a value), else 0.
 */
int sjson_text_ok(const char *s, size_t len);

/*
 * The length (1 to 4) of the one character that starts s[0..len), or 0 when
 * the bytes there are not a valid UTF-8 character or are a NUL: for
 * writers that keep what is valid and escape the rest byte by byte.
 */
size_t sjson_char_len(const char *s, size_t len);

/*
 * An int64 as a JSON number written exactly ("%" PRId64), never through a
 * double: cJSON's own numbers are doubles and print 2^53 + 1 and above (and
 * large timestamps) rounded or with an exponent. NULL when out of memory.
 */
cJSON *sjson_int64(int64_t v);
/* Adds it to obj under name; returns the item or NULL. */
cJSON *sjson_add_int64(cJSON *obj, const char *name, int64_t v);
