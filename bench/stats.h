/* Timing and percentiles shared by the benchmarks. */
#pragma once

#include <stddef.h>

/* Monotonic milliseconds. */
double now_ms(void);

struct stats {
	size_t n;
	double p50, p95, p99, mean;
};

/* Nearest-rank percentile of a sorted array; permille 500 is the median. */
double percentile(const double *sorted, size_t n, size_t permille);
/* Sorts v in place and fills s. */
void stats_of(double *v, size_t n, struct stats *s);
