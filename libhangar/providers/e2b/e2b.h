/*
 * The e2b provider: sandboxes on E2B (cloud, self-hosted) or CubeSandbox,
 * through their control API (api.h); commands, files and terminals go to each
 * sandbox's envd through the library's envd client.
 *
 * One table, e2b_provider_ops (e2b.c), serves every flavour: its init reads
 * HANGAR_E2B_FLAVOR and takes that flavour's table (cloud.c, selfhosted.c,
 * cube.c): its requirements and capabilities, and hooks for the routes and
 * bodies where its control API differs. The core knows none of this.
 *
 * The table's operations: create.c makes sandboxes (and kills those nobody
 * may use), lifecycle.c connects, resumes, kills, pauses and lists them,
 * envd.c says where each one's envd is and with which tokens, templates.c
 * takes snapshots and builds templates, extras.c has forks, metrics and
 * logs.
 */
#pragma once

#include <pthread.h>

#include "api.h"
#include "hangar/template.h"

#define ENVD_PORT 49983
#define E2B_MAX_TIMEOUT (366LL * 86400)   /* what "no limit" becomes where the platform has none */
#define LIST_PAGE 100                     /* entries asked for per list page */
#define LIST_MAX_PAGES 10000              /* a list longer than this is refused */
#define TRAFFIC_SECRET "traffic-token"    /* the name a traffic token is sealed under */

struct e2b_known;

/* One provider instance: a context's e2b provider on one flavour. */
struct e2b {
	hangar_ctx *ctx;
	const struct e2b_flavour *fl;
	struct e2b_api api;
	char *domain;               /* HANGAR_E2B_DOMAIN */
	char *sandbox_url;          /* HANGAR_E2B_SANDBOX_URL, or NULL */
	char *ca_file;              /* HANGAR_E2B_CA_FILE, or NULL */
	int allow_unauth;
	cJSON *templates;           /* HANGAR_E2B_ENVIRONMENT_TEMPLATES */
	int64_t default_timeout;    /* HANGAR_SANDBOX_TIMEOUT_SECONDS */
	int64_t build_timeout_ms;
	pthread_mutex_t mu;
	struct e2b_known *known;
};

/*
 * A flavour: what its platform requires and reports, and hooks where its
 * control API differs in shape. Each flavour's file fills its table;
 * E2B's own shapes (cloud and self-hosted run the same infra) are the
 * e2b_infra_* hooks of infra.c. Every hook is set; the provider calls them
 * and never asks which flavour it runs.
 */
struct e2b_flavour {
	const char *name;           /* "cloud", "selfhosted", "cube" */
	uint64_t capabilities;      /* HANGAR_CAP_* reported on this flavour (FS_PAUSE: pause with memory=false,
				       FORK: the fork route) */
	int need_key;               /* HANGAR_E2B_API_KEY is required */
	int need_api_url;           /* HANGAR_E2B_API_URL is required */
	const char *sandboxes_path; /* create is POST here, connect POST <this>/{id}/connect */
	int64_t no_limit_timeout;   /* the timeout create and set-timeout send for "no limit" */
	int traffic_token_once;     /* only create's answer has the traffic token: it must be kept sealed */
	int pages;                  /* the list routes page with nextToken (else one answer is all) */
	const char *no_metrics;     /* why there are no metrics (HANGAR_EUNSUPPORTED), or NULL */

	/* The template id a create names for tpl (a name, alias or id) into out. */
	int (*resolve_template)(struct e2b *e, const char *tpl, char *out, size_t size);
	/* The connect route's body: timeout > 0 is asked for, < 0 is "no limit", 0 is
	   nothing in particular; running says the sandbox runs (connect only extends it). */
	void (*connect_body)(cJSON *body, int64_t timeout, int running);
	/* The pause route's body into *out (NULL: none); 0, or -1 when memory runs out. */
	int (*pause_body)(cJSON **out, int memory);
	/* Builds a template from o->image; its id into out. */
	int (*template_build)(struct e2b *e, const struct hangar_template_build_opts *o, hangar_buf *out);
	/* The path of a build's status; offset is how many log entries were seen. */
	void (*build_status_path)(char *out, size_t size, const char *tid, const char *bid, int offset);
	/* The path of the template list; token is the escaped page token, "" for the first. */
	void (*template_list_path)(char *out, size_t size, const char *token);
};

/* The flavours, and the one HANGAR_E2B_FLAVOR names (NULL for an unknown name). */
extern const struct e2b_flavour e2b_flavour_cloud;
extern const struct e2b_flavour e2b_flavour_selfhosted;
extern const struct e2b_flavour e2b_flavour_cube;
const struct e2b_flavour *e2b_flavour_named(const char *name);

/* E2B's own control API (infra.c), the hooks of cloud and self-hosted. */
int e2b_infra_resolve_template(struct e2b *e, const char *tpl, char *out, size_t size);
void e2b_infra_connect_body(cJSON *body, int64_t timeout, int running);
int e2b_infra_pause_body(cJSON **out, int memory);
int e2b_infra_template_build(struct e2b *e, const struct hangar_template_build_opts *o, hangar_buf *out);
void e2b_infra_build_status_path(char *out, size_t size, const char *tid, const char *bid, int offset);
void e2b_infra_template_list_path(char *out, size_t size, const char *token);

/* What the hooks share of the provider (e2b.c, templates.c). */
int e2b_oom(void);
int e2b_put_buf(hangar_buf *out, const char *s);
void e2b_progress(const struct hangar_template_build_opts *o, const char *status, const char *msg);
/* Polls a build until it is ready, failed, or HANGAR_E2B_TEMPLATE_BUILD_TIMEOUT_SECONDS passed. */
int e2b_follow_build(struct e2b *e, const struct hangar_template_build_opts *o, const char *tid, const char *bid);

/* e2b.c: ids, and what is remembered of each sandbox between calls */

/* Sets HANGAR_EINVAL for a malformed sandbox id; returns it. */
int e2b_bad_id(const char *id);
/* Remembers sandbox id's lifetime, which a resume restarts. */
void e2b_remember(struct e2b *e, const char *id, int64_t timeout_sec);
/* Sandbox id's remembered lifetime, else HANGAR_SANDBOX_TIMEOUT_SECONDS. */
int64_t e2b_remembered_timeout(struct e2b *e, const char *id);
/* Forgets sandbox id: it is gone. */
void e2b_forget(struct e2b *e, const char *id);

/* envd.c */

/* Sets out's envd URL and routing headers; answer_domain is the answer's, NULL for the configured one. */
int e2b_describe_envd(struct e2b *e, const char *id, const char *answer_domain, hangar_sys_sandbox *out);
/* Fills out from a Sandbox answer j, applying the token rules (*refused: a rule refused it). 0 or an error set. */
int e2b_describe(struct e2b *e, const char *id, const cJSON *j, hangar_sys_sandbox *out, int *refused);
/* Seals the traffic token of answer j, if it has one, in place of the kept one; errors are only logged. */
void e2b_reseal(struct e2b *e, const char *id, const cJSON *j);

/* create.c */

/* Kills a sandbox nobody may use, keeping the thread's error (saying so when the kill failed too). */
void e2b_kill_refused(struct e2b *e, const char *id);
/* Takes a new sandbox from answer j (create, fork) into out, killing it when refused: 0 or an error set. */
int e2b_adopt(struct e2b *e, const cJSON *j, int64_t timeout, hangar_sys_sandbox *out);

/* The operations of the one table (create.c, lifecycle.c, templates.c, extras.c). */
int e2b_create(void *state, const struct hangar_create_opts *opts, hangar_sys_sandbox *out);
int e2b_connect(void *state, const char *id, hangar_sys_sandbox *out);
int e2b_kill(void *state, const char *id);
int e2b_pause(void *state, const char *id);
int e2b_pause_filesystem(void *state, const char *id);
int e2b_resume(void *state, const char *id, hangar_sys_sandbox *out);
int e2b_set_timeout(void *state, const char *id, int64_t seconds);
int e2b_list(void *state, hangar_sys_list *out);
int e2b_snapshot(void *state, const char *id, const char *name, hangar_buf *out_id);
int e2b_template_build(void *state, const struct hangar_template_build_opts *opts, hangar_buf *out_template_id);
int e2b_fork(void *state, const char *id, uint32_t count, int64_t timeout_sec, hangar_sys_list *out);
int e2b_metrics(void *state, const char *id, int (*fn)(const struct hangar_sandbox_metric *metric, void *payload),
		void *payload);
int e2b_logs(void *state, const char *id, int (*fn)(const struct hangar_sandbox_log_entry *entry, void *payload),
	     void *payload);
int e2b_template_list(void *state, int (*fn)(const struct hangar_template_info *info, void *payload),
		      void *payload);

/* The provider's table, listed in libhangar/modules.c. */
extern const struct hangar_provider_ops e2b_provider_ops;
