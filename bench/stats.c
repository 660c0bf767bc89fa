#include "stats.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

double percentile(const double *sorted, size_t n, size_t permille)
{
	size_t rank;

	if (n == 0)
		return 0;
	rank = (permille * n + 999) / 1000;
	if (rank < 1)
		rank = 1;
	return sorted[rank - 1];
}

void stats_of(double *v, size_t n, struct stats *s)
{
	double sum = 0;

	memset(s, 0, sizeof(*s));
	s->n = n;
	if (n == 0)
		return;
	qsort(v, n, sizeof(*v), cmp_double);
	for (size_t i = 0; i < n; i++)
		sum += v[i];
	s->mean = sum / (double)n;
	s->p50 = percentile(v, n, 500);
	s->p95 = percentile(v, n, 950);
	s->p99 = percentile(v, n, 990);
}
