/*
 * hangard's own settings, HANGARD_*: defaults, then a KEY=VALUE file
 * (-config), then the environment, then the command line. One table names
 * each setting, its kind and bounds, so the man page, the file, the
 * environment and the flags cannot disagree on a name.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hangard.h"

enum kind { K_STR, K_UINT, K_SIZE, K_U64 };

static const struct key {
	const char *name;
	enum kind kind;
	size_t off;
	uint64_t min, max;
	const char *def;
} keys[] = {
#define F(f) offsetof(struct hangard_config, f)
	{ "HANGARD_ADDR", K_STR, F(addr), 0, 0, "127.0.0.1" },
	{ "HANGARD_PORT", K_UINT, F(port), 0, 65535, "8086" },
	{ "HANGARD_TOKENS_FILE", K_STR, F(tokens_file), 0, 0, NULL },
	{ "HANGARD_TLS_CERT", K_STR, F(tls_cert), 0, 0, NULL },
	{ "HANGARD_TLS_KEY", K_STR, F(tls_key), 0, 0, NULL },
	{ "HANGARD_TMPDIR", K_STR, F(tmpdir), 0, 0, NULL },
	{ "HANGARD_MAX_CONNECTIONS", K_UINT, F(max_connections), 1, 100000, "1024" },
	{ "HANGARD_IDLE_TIMEOUT_SECONDS", K_UINT, F(idle_timeout_s), 1, 86400, "30" },
	{ "HANGARD_MAX_BODY_BYTES", K_SIZE, F(max_body), 2, 1u << 30, "1048576" },
	{ "HANGARD_MAX_UPLOAD_BYTES", K_U64, F(max_upload), 1, UINT64_C(1) << 40, "1073741824" },
	{ "HANGARD_HEADER_LIMIT_BYTES", K_SIZE, F(header_limit), 4096, 1u << 24, "8192" },
	{ "HANGARD_THREADS", K_UINT, F(threads), 1, 64, "2" },
	{ "HANGARD_WORKERS", K_UINT, F(workers), 1, 4096, "32" },
	{ "HANGARD_QUEUE", K_UINT, F(queue), 1, 1000000, "1024" },
	{ "HANGARD_SHUTDOWN_SECONDS", K_UINT, F(shutdown_s), 0, 3600, "10" },
	{ "HANGARD_EVENT_QUEUE_BYTES", K_SIZE, F(event_queue_bytes), 1024, 1u << 30, "262144" },
	{ "HANGARD_EVENT_HEARTBEAT_SECONDS", K_UINT, F(event_heartbeat_s), 1, 3600, "15" },
	{ "HANGARD_TOKEN_RATE", K_UINT, F(token_rate), 0, 1000000, "0" },
	{ "HANGARD_TOKEN_BURST", K_UINT, F(token_burst), 1, 1000000, "100" },
	{ "HANGARD_REAPER_INTERVAL_SECONDS", K_UINT, F(reaper_interval_s), 0, 86400, "30" },
	{ "HANGARD_REAPER_LEASE_SECONDS", K_UINT, F(reaper_lease_s), 2, 86400, "90" },
	{ "HANGARD_SANDBOX_DOMAIN", K_STR, F(sandbox_domain), 0, 0, NULL },
	{ "HANGARD_SANDBOX_STALL_SECONDS", K_UINT, F(sandbox_stall_s), 1, 86400, "300" },
	{ "HANGARD_EDGE_CA_FILE", K_STR, F(edge_ca_file), 0, 0, NULL },
#undef F
};

static const struct key *find_key(const char *name)
{
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		if (strcmp(keys[i].name, name) == 0)
			return &keys[i];
	return NULL;
}

static int set_key(struct hangard_config *cfg, const struct key *k, const char *value, const char *where)
{
	char *p = (char *)cfg + k->off;
	if (k->kind == K_STR) {
		char *dup = value[0] ? strdup(value) : NULL;
		if (value[0] && !dup)
			return -1;
		free(*(char **)p);
		*(char **)p = dup;
		return 0;
	}
	char *end;
	errno = 0;
	unsigned long long v = strtoull(value, &end, 10);
	if (errno || end == value || *end || value[0] == '-' || v < k->min || v > k->max) {
		fprintf(stderr, "hangard: %s: %s=%s is not a whole number from %" PRIu64 " to %" PRIu64 "\n", where,
			k->name, value, k->min, k->max);
		return -1;
	}
	if (k->kind == K_UINT)
		*(unsigned *)p = (unsigned)v;
	else if (k->kind == K_SIZE)
		*(size_t *)p = (size_t)v;
	else
		*(uint64_t *)p = (uint64_t)v;
	return 0;
}

static int add_lib(struct hangard_setting **lib, size_t *n, const char *name, const char *value)
{
	struct hangard_setting *nv = realloc(*lib, (*n + 1) * sizeof(**lib));
	if (!nv)
		return -1;
	*lib = nv;
	nv[*n].name = strdup(name);
	nv[*n].value = strdup(value);
	if (!nv[*n].name || !nv[*n].value) {
		free(nv[*n].name);
		free(nv[*n].value);
		return -1;
	}
	(*n)++;
	return 0;
}

static int read_file(struct hangard_config *cfg, struct hangard_setting **lib, size_t *n_lib, const char *file)
{
	FILE *f = fopen(file, "re");
	char line[4096], where[256];
	unsigned lineno = 0;
	int rc = 0;

	if (!f) {
		fprintf(stderr, "hangard: cannot read the config file %s: %s\n", file, strerror(errno));
		return -1;
	}
	while (rc == 0 && fgets(line, sizeof(line), f)) {
		char *p, *eq, *end;
		lineno++;
		snprintf(where, sizeof(where), "%s:%u", file, lineno);
		p = line + strspn(line, " \t");
		end = p + strlen(p);
		while (end > p && (end[-1] == '\n' || end[-1] == '\r' || end[-1] == ' ' || end[-1] == '\t'))
			*--end = '\0';
		if (*p == '\0' || *p == '#')
			continue;
		eq = strchr(p, '=');
		if (!eq) {
			fprintf(stderr, "hangard: %s: expected KEY=VALUE\n", where);
			rc = -1;
			break;
		}
		*eq = '\0';
		const char *value = eq + 1;
		const struct key *k = find_key(p);
		if (k)
			rc = set_key(cfg, k, value, where);
		else if (strncmp(p, "HANGAR_", 7) == 0)
			rc = getenv(p) ? 0 : add_lib(lib, n_lib, p, value);
		else {
			fprintf(stderr, "hangard: %s: unknown setting %s\n", where, p);
			rc = -1;
		}
	}
	fclose(f);
	return rc;
}

int config_load(struct hangard_config *cfg, struct hangard_setting **lib, size_t *n_lib, const char *file,
		const struct hangard_setting *flags, size_t n_flags)
{
	memset(cfg, 0, sizeof(*cfg));
	*lib = NULL;
	*n_lib = 0;
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		if (keys[i].def && set_key(cfg, &keys[i], keys[i].def, "default") < 0)
			return -1;
	if (file && read_file(cfg, lib, n_lib, file) < 0)
		return -1;
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		const char *v = getenv(keys[i].name);
		if (v && set_key(cfg, &keys[i], v, "environment") < 0)
			return -1;
	}
	for (size_t i = 0; i < n_flags; i++) {
		const struct key *k = find_key(flags[i].name);
		if (!k) {
			fprintf(stderr, "hangard: unknown flag for %s\n", flags[i].name);
			return -1;
		}
		if (set_key(cfg, k, flags[i].value, "command line") < 0)
			return -1;
	}
	if (cfg->reaper_interval_s && cfg->reaper_lease_s <= cfg->reaper_interval_s) {
		/* A holder that renews less often than its lease lasts loses it between passes. */
		fprintf(stderr,
			"hangard: HANGARD_REAPER_LEASE_SECONDS (%u) must be more than HANGARD_REAPER_INTERVAL_SECONDS (%u)\n",
			cfg->reaper_lease_s, cfg->reaper_interval_s);
		return -1;
	}
	if (!cfg->tmpdir) {
		const char *t = getenv("TMPDIR");
		cfg->tmpdir = strdup(t && t[0] ? t : "/tmp");
		if (!cfg->tmpdir)
			return -1;
	}
	return 0;
}

void config_free(struct hangard_config *cfg, struct hangard_setting *lib, size_t n_lib)
{
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		if (keys[i].kind == K_STR) {
			char **p = (char **)((char *)cfg + keys[i].off);
			free(*p);
			*p = NULL;
		}
	for (size_t i = 0; i < n_lib; i++) {
		free(lib[i].name);
		free(lib[i].value);
	}
	free(lib);
}
