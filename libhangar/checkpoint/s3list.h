/*
 * The answer to S3's ListMultipartUploads (GET /BUCKET?uploads), parsed
 * whole and strictly: see s3list.c.
 */
#pragma once

#include <stddef.h>
#include <time.h>

struct s3_upload {
	char *key, *id;
	time_t initiated;
};

struct s3_listing {
	struct s3_upload *u;
	size_t n;
	int truncated;          /* -1 until IsTruncated is read */
	char *next_key, *next_id;       /* NULL when the answer has none */
};

/*
 * Parses body[0..len) into l: 0, or -1 with *why saying what is wrong (a
 * static string) and l empty. At most max uploads: a page longer than asked
 * for is refused. A truncated listing without a NextKeyMarker is refused.
 */
int s3_listing_parse(struct s3_listing *l, const char *body, size_t len, size_t max, const char **why);
void s3_listing_free(struct s3_listing *l);
