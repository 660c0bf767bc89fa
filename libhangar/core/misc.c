/* Buffers, version and clocks. */
#include <stdlib.h>
#include <time.h>

#include "internal.h"

void hangar_buf_dispose(hangar_buf *buf)
{
	if (!buf)
		return;
	free(buf->ptr);
	buf->ptr = NULL;
	buf->size = 0;
	buf->reserved = 0;
}

const char *hangar_version(void)
{
	return HANGAR_VERSION_STRING;
}

uint32_t hangar_version_number(void)
{
	return HANGAR_VERSION_NUMBER;
}

int64_t hnow_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

int64_t hmono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}
