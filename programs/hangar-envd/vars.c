/*
 * The variables every command gets by default: those envd was started with
 * (-env), and those a claim adds. A local sandbox started ahead of time for
 * the warm pool is started with none of a caller's; the caller that claims
 * it sends its own with the token rotation (POST /hangar/v1/token), so the
 * first command already sees them, as if envd had been started with them.
 *
 * The list in force is read by any request thread while a claim may replace
 * it once: it is swapped atomically and the list it replaces is never
 * freed, since a reader may still be walking it.
 */
#include "envd.h"
#include "sjson.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

char **envd_default_env(void)
{
	return __atomic_load_n(&envd_cfg.default_env, __ATOMIC_ACQUIRE);
}

/* Whether one entry of a claim's "env" is KEY=VALUE, and small enough; why not in why. */
static int var_ok(const cJSON *v, size_t i, char *why, size_t whylen)
{
	const char *s = cJSON_IsString(v) ? v->valuestring : NULL;

	if (!s) {
		snprintf(why, whylen, "env[%zu] is not a string", i);
		return 0;
	}
	if (s[0] == '=' || !strchr(s, '=')) {
		snprintf(why, whylen, "env[%zu] is not KEY=VALUE", i);
		return 0;
	}
	if (strlen(s) > ENVD_VAR_MAX) {
		snprintf(why, whylen, "env[%zu] is longer than %u bytes", i, ENVD_VAR_MAX);
		return 0;
	}
	return 1;
}

/* The "env" array of body, checked entry by entry; NULL with why set. */
static const cJSON *parse_vars(const cJSON *body, char *why, size_t whylen)
{
	const cJSON *env = cJSON_GetObjectItemCaseSensitive(body, "env"), *v;
	size_t i = 0;

	if (!cJSON_IsObject(body) || !cJSON_IsArray(env) || cJSON_GetArraySize(body) != 1) {
		snprintf(why, whylen, "the body must be {\"env\": [\"KEY=VALUE\", ...]} and nothing else");
		return NULL;
	}
	cJSON_ArrayForEach(v, env) {
		if (!var_ok(v, i++, why, whylen))
			return NULL;
	}
	return env;
}

/* A new list: the defaults in force, then env's entries, in one block for one free(). */
static char **merged(const cJSON *env)
{
	char **now = envd_default_env(), **list, *p;
	size_t count = 0, bytes = 0, n = 0;
	const cJSON *v;

	for (char **e = now; e && *e; e++, count++)
		bytes += strlen(*e) + 1;
	cJSON_ArrayForEach(v, env) {
		bytes += strlen(v->valuestring) + 1;
		count++;
	}
	list = malloc((count + 1) * sizeof(char *) + bytes);
	if (!list)
		return NULL;
	p = (char *)(list + count + 1);
	for (char **e = now; e && *e; e++) {
		list[n++] = p;
		p = stpcpy(p, *e) + 1;
	}
	cJSON_ArrayForEach(v, env) {
		list[n++] = p;
		p = stpcpy(p, v->valuestring) + 1;
	}
	list[n] = NULL;
	return list;
}

int envd_vars_prepare(const char *body, size_t len, char ***out, char *why, size_t whylen)
{
	cJSON *json;
	const cJSON *env;

	*out = NULL;
	if (len == 0)
		return 0;
	if (len > ENVD_VARS_BODY_MAX) {
		snprintf(why, whylen, "the body is larger than %u bytes", ENVD_VARS_BODY_MAX);
		return -EINVAL;
	}
	json = sjson_parse(body, len, 0, why, whylen);
	if (!json)
		return -EINVAL;
	env = parse_vars(json, why, whylen);
	if (env && cJSON_GetArraySize(env) > 0 && !(*out = merged(env))) {
		cJSON_Delete(json);
		return -ENOMEM;
	}
	cJSON_Delete(json);
	return env ? 0 : -EINVAL;
}

/* The list a claim replaced, kept reachable: a reader may still be walking it. */
static char **replaced;

void envd_vars_publish(char **list)
{
	if (list)
		replaced = __atomic_exchange_n(&envd_cfg.default_env, list, __ATOMIC_ACQ_REL);
}
