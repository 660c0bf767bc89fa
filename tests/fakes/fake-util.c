/* Logging, time, JSON and string helpers shared by every part of the fake. */
#define _GNU_SOURCE
#include "fake-e2b.h"

void vlog(const char *fmt, ...)
{
	va_list ap;

	if (!g.verbose)
		return;
	va_start(ap, fmt);
	fputs("fake-e2b: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

int64_t wall_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void ms_to_timespec(int64_t ms, struct timespec *ts)
{
	ts->tv_sec = (time_t)(ms / 1000);
	ts->tv_nsec = (long)(ms % 1000) * 1000000L;
}

static void rfc3339(int64_t ms, char *out, size_t n)
{
	time_t t = (time_t)(ms / 1000);
	struct tm tm;

	gmtime_r(&t, &tm);
	snprintf(out, n, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1,
		 tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (int)(ms % 1000));
}

void add_time(cJSON *o, const char *key, int64_t ms)
{
	char buf[64];

	rfc3339(ms, buf, sizeof(buf));
	cJSON_AddStringToObject(o, key, buf);
}

static void random_bytes(unsigned char *p, size_t n)
{
	while (n > 0) {
		ssize_t r = getrandom(p, n, 0);

		if (r < 0) {
			if (errno == EINTR)
				continue;
			perror("fake-e2b: getrandom");
			abort();
		}
		p += r;
		n -= (size_t)r;
	}
}

void random_from(char *out, size_t n, const char *alphabet)
{
	unsigned char b[128];
	size_t k = strlen(alphabet);

	if (n > sizeof(b))
		n = sizeof(b);
	random_bytes(b, n);
	for (size_t i = 0; i < n; i++)
		out[i] = alphabet[b[i] % k];
	out[n] = '\0';
}

void random_hex(char *out, size_t n)
{
	random_from(out, n, "0123456789abcdef");
}

void random_uuid(char *out)
{
	char h[33];

	random_hex(h, 32);
	h[12] = '4';
	h[16] = "89ab"[h[16] % 4];
	snprintf(out, 37, "%.8s-%.4s-%.4s-%.4s-%.12s", h, h + 8, h + 12, h + 16, h + 20);
}

int is_cube(void)
{
	return g.flavour == FL_CUBE;
}

int valid_path_id(const char *s)
{
	if (!*s)
		return 0;
	for (; *s; s++)
		if (!isalnum((unsigned char)*s) && *s != '-')
			return 0;
	return 1;
}

int valid_cube_alias(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > 64 || !(islower((unsigned char)s[0]) || isdigit((unsigned char)s[0])))
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!(islower((unsigned char)s[i]) || isdigit((unsigned char)s[i]) || s[i] == '-'))
			return 0;
	return strncmp(s, "tpl-", 4) != 0 && strncmp(s, "snap-", 5) != 0;
}

int write_all(int fd, const void *p, size_t n)
{
	const char *c = p;

	while (n > 0) {
		ssize_t w = write(fd, c, n);

		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		c += w;
		n -= (size_t)w;
	}
	return 0;
}

/* Waits on a private condition variable: an answer held back on purpose. */
void wait_ms(int ms)
{
	pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
	pthread_cond_t c;
	pthread_condattr_t a;
	struct timespec ts;
	int64_t deadline = clock_mono_ms() + ms;

	pthread_condattr_init(&a);
	pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
	pthread_cond_init(&c, &a);
	pthread_condattr_destroy(&a);
	pthread_mutex_lock(&m);
	ms_to_timespec(deadline, &ts);
	while (clock_mono_ms() < deadline)
		if (pthread_cond_timedwait(&c, &m, &ts) == ETIMEDOUT)
			break;
	pthread_mutex_unlock(&m);
	pthread_cond_destroy(&c);
	pthread_mutex_destroy(&m);
}
