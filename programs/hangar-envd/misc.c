/* GET /metrics and GET /envs. */
#define _GNU_SOURCE
#include "envd.h"

#include <math.h>
#include <microhttpd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

static struct MHD_Response *json_body(cJSON *o)
{
	char *json = cJSON_PrintUnformatted(o);
	struct MHD_Response *resp;

	cJSON_Delete(o);
	if (!json)
		return NULL;
	resp = MHD_create_response_from_buffer(strlen(json), json, MHD_RESPMEM_MUST_FREE);
	if (!resp) {
		free(json);
		return NULL;
	}
	MHD_add_response_header(resp, "Content-Type", "application/json");
	return resp;
}

/* Sums the first line of /proc/stat: total and idle jiffies. */
static int cpu_times(unsigned long long *total, unsigned long long *idle)
{
	unsigned long long v[10] = { 0 };
	FILE *f = fopen("/proc/stat", "re");
	int n;

	if (!f)
		return -1;
	n = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3],
		   &v[4], &v[5], &v[6], &v[7], &v[8], &v[9]);
	fclose(f);
	if (n < 4)
		return -1;
	*total = 0;
	for (int i = 0; i < 8; i++)
		*total += v[i];
	*idle = v[3] + v[4];
	return 0;
}

static long long meminfo_kb(const char *key)
{
	char line[256];
	size_t klen = strlen(key);
	long long v = -1;
	FILE *f = fopen("/proc/meminfo", "re");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (strncmp(line, key, klen) == 0 && line[klen] == ':') {
			v = strtoll(line + klen + 1, NULL, 10);
			break;
		}
	fclose(f);
	return v;
}

struct MHD_Response *envd_metrics_response(void)
{
	unsigned long long t0, i0, t1, i1;
	struct timespec pause = { 0, 100 * 1000 * 1000 };
	struct statvfs vfs;
	long long total_kb = meminfo_kb("MemTotal"), avail_kb = meminfo_kb("MemAvailable");
	long long cached_kb = meminfo_kb("Cached");
	double used_pct = 0;
	cJSON *o;

	if (total_kb < 0 || avail_kb < 0 || statvfs("/", &vfs) < 0)
		return NULL;
	/* CPU use over a short window, as a percentage of all CPUs. */
	if (cpu_times(&t0, &i0) == 0) {
		nanosleep(&pause, NULL);
		if (cpu_times(&t1, &i1) == 0 && t1 > t0)
			used_pct = 100.0 * (double)((t1 - t0) - (i1 - i0)) / (double)(t1 - t0);
	}
	o = cJSON_CreateObject();
	cJSON_AddNumberToObject(o, "ts", (double)time(NULL));
	cJSON_AddNumberToObject(o, "cpu_count", (double)sysconf(_SC_NPROCESSORS_ONLN));
	cJSON_AddNumberToObject(o, "cpu_used_pct", round(used_pct * 100) / 100);
	cJSON_AddNumberToObject(o, "mem_total_mib", (double)(total_kb / 1024));
	cJSON_AddNumberToObject(o, "mem_used_mib", (double)((total_kb - avail_kb) / 1024));
	cJSON_AddNumberToObject(o, "mem_total", (double)total_kb * 1024);
	cJSON_AddNumberToObject(o, "mem_used", (double)(total_kb - avail_kb) * 1024);
	cJSON_AddNumberToObject(o, "mem_cache", (double)(cached_kb > 0 ? cached_kb : 0) * 1024);
	cJSON_AddNumberToObject(o, "disk_total", (double)vfs.f_blocks * (double)vfs.f_frsize);
	cJSON_AddNumberToObject(o, "disk_used",
				(double)(vfs.f_blocks - vfs.f_bavail) * (double)vfs.f_frsize);
	return json_body(o);
}

struct MHD_Response *envd_envs_response(void)
{
	cJSON *o = cJSON_CreateObject();

	for (char **e = envd_default_env(); e && *e; e++) {
		const char *eq = strchr(*e, '=');
		char key[256];

		if (!eq || (size_t)(eq - *e) >= sizeof(key))
			continue;
		memcpy(key, *e, (size_t)(eq - *e));
		key[eq - *e] = '\0';
		cJSON_DeleteItemFromObjectCaseSensitive(o, key);
		cJSON_AddStringToObject(o, key, eq + 1);
	}
	return json_body(o);
}
