/*
 * fake-e2b: declarations shared by the files of the fake control planes.
 * The program, its flags and the behaviour it models are described in fake-e2b.c.
 */
#ifndef FAKE_E2B_H
#define FAKE_E2B_H

#include <arpa/inet.h>
#include <cjson/cJSON.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <pwd.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "clock.h"

#define ENVD_PORT 49983
#define ENVD_VERSION "0.6.4"
#define E2B_CLIENT_ID "6532622b"
#define MAX_BODY (4u << 20)
#define EDGE_HEAD_MAX 65536
#define READY_TIMEOUT_MS 10000
#define NEVER INT64_MAX
#define ENVD_AUTH_FAILED \
	"unauthorized access, please provide a valid access token or method signing if supported"

enum flavour { FL_CLOUD, FL_SELFHOSTED, FL_CUBE };
enum sb_state { SB_RUNNING, SB_PAUSED, SB_DEAD };
enum tpl_status { T_WAITING, T_BUILDING, T_READY, T_ERROR };

struct sandbox {
	struct sandbox *next;
	pthread_mutex_t op;          /* serialises lifecycle operations */
	char id[40];
	char template_id[80];
	char *alias;
	enum sb_state state;
	int pause_full;              /* pauseMode full (1) or filesystem (0) */
	pid_t envd_pid;              /* 0 when no envd runs */
	int envd_port;
	int secure;
	char envd_token[65];
	char traffic_token[65];
	int public_traffic;
	int allow_internet;          /* -1 unset */
	int auto_pause, auto_pause_memory, auto_resume;
	int64_t started_ms;          /* wall clock */
	int64_t expires;             /* monotonic ms, NEVER */
	int64_t timeout_s;           /* creation timeout (cube: idle window, -1 never) */
	cJSON *metadata, *env_vars, *network, *logs;
	int cpu, mem_mb, disk_mb;
};

struct template {
	struct template *next;
	char id[64];
	char *alias;
	char *tag;
	char build_id[64];           /* E2B build, or Cube job */
	enum tpl_status status;
	int steps_left;
	int phase;
	int deleted;
	int is_snapshot;
	int is_public;
	char snap_id[160];
	char origin[40];
	char source_tpl[80];
	cJSON *names;
	cJSON *build_logs;
	cJSON *create_request;
	int64_t created_ms;
	int cpu, mem_mb;
};

struct fault {
	struct fault *next;
	char route[32];
	int status, count, retry_after, delay_ms, drop;
	int repeat_token, make_public, fork_errors; /* change the answer instead of failing it */
	int after;                   /* delay_ms and drop apply after the route has acted */
	int no_route;                /* answered as an unknown route */
	char envd[32];               /* edge: a broken envd answer instead of envd's own */
	char message[128];           /* status: the error body's message instead of the default */
	char mangle[16];             /* "duplicate" or "trailing": the answer made not strict JSON */
};

struct spawn_req {
	struct spawn_req *next;
	char **argv;
	int log_fd;
	int done;
	pid_t pid;
	int ready_fd;
};

struct fake_globals {
	enum flavour flavour;
	const char *envd_path, *api_key, *domain, *state_dir;
	int verbose, build_steps;
	long page_size;              /* --page-size: every paged answer holds at most this many; 0 no cap */
	char user[64];
	pthread_mutex_t lock;
	pthread_cond_t cond;         /* reaper wake-up; CLOCK_MONOTONIC */
	struct sandbox *sandboxes;
	struct template *templates;
	struct fault *faults;
	int stopping;
	pthread_mutex_t sp_lock;
	pthread_cond_t sp_cond;
	struct spawn_req *sp_queue;
	int sp_stop;
	int edge_fd;
};

extern struct fake_globals g;

struct reply {
	unsigned status;
	char *body;
	size_t len;
	const char *ctype;
	int nhdr;
	char hdr[8][2][160];
};

struct req {
	struct MHD_Connection *conn;
	const char *method;
	char *url;
	char *pathbuf;               /* url, cut into segs */
	char *body;
	size_t len, cap;
	int too_big;
	char *segs[12];
	int nseg;
	char route[32];
	int repeat_token;            /* a fault: X-Next-Token repeats the request's nextToken */
	int make_public;             /* a fault: the create is public, no traffic token */
	int fork_errors;             /* a fault: this many forks fail with an error entry */
};

struct create_opts {
	const struct template *tpl;
	char template_id[80];
	char *alias;
	int64_t timeout_s;
	int secure, public_traffic, allow_internet;
	int auto_pause, auto_pause_memory, auto_resume;
	cJSON *metadata, *env_vars, *network;
};

enum view { V_CREATE, V_CONNECT, V_DETAIL, V_LISTED };

/* fake-util.c */
void vlog(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
int64_t wall_ms(void);
void ms_to_timespec(int64_t ms, struct timespec *ts);
void add_time(cJSON *o, const char *key, int64_t ms);
void random_from(char *out, size_t n, const char *alphabet);
void random_hex(char *out, size_t n);
void random_uuid(char *out);
int is_cube(void);
int valid_path_id(const char *s);
int valid_cube_alias(const char *s);
int write_all(int fd, const void *p, size_t n);
void wait_ms(int ms);

/* fake-proc.c */
void sb_log(struct sandbox *sb, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void *spawner_main(void *arg);
void stop_tree(struct sandbox *sb);
void cont_tree(struct sandbox *sb);
void kill_tree(struct sandbox *sb);
int start_envd(struct sandbox *sb);

/* fake-state.c */
struct sandbox *find_sandbox_locked(const char *id);
struct sandbox *find_live(const char *id);
void set_expiry_locked(struct sandbox *sb, int64_t expires);
int64_t expiry_after(int64_t seconds);
int64_t expires_wall_ms(const struct sandbox *sb);
void new_token(char *out);
void sb_pause(struct sandbox *sb, int memory);
int sb_resume(struct sandbox *sb);
void sb_kill(struct sandbox *sb);
void free_sandbox(struct sandbox *sb);
void *reaper_main(void *arg);
struct template *add_template(const char *id, const char *alias);
void new_template_id(char *out, size_t n);
struct template *resolve_template_locked(const char *ref);
struct template *find_template_by_build_locked(const char *build);
void free_template(struct template *t);
void start_build_locked(struct template *t, int new_id);
void advance_build_locked(struct template *t);
int take_fault(const char *route, struct fault *out);
int take_edge_fault(const char *route, struct fault *out);

/* fake-envd-faults.c */
int edge_envd_fault(int fd, const char *mode, const char *buf, size_t head_len, size_t have);
void clear_faults_locked(void);

/* fake-http.c */
void reply_header(struct reply *r, const char *k, const char *v);
void reply_json(struct reply *r, unsigned status, cJSON *o);
void reply_empty(struct reply *r, unsigned status);
void reply_text(struct reply *r, unsigned status, const char *text);
void reply_error(struct reply *r, unsigned status, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
void reply_no_route(struct reply *r);
void reply_405(struct reply *r, const char *allow);
const char *hdr(const struct req *q, const char *name);
const char *arg(const struct req *q, const char *name);
cJSON *body_object(struct req *q, struct reply *r, int allow_empty);
void reply_bad_field(struct reply *r, const char *field, const char *want);
void reply_missing_field(struct reply *r, const char *field);
int int_field(cJSON *o, const char *name, int64_t *out, int *present, struct reply *r);
int bool_field(cJSON *o, const char *name, int *out, struct reply *r);
int string_map(cJSON *o, const char *name, cJSON **out, struct reply *r);
cJSON *sandbox_json_locked(const struct sandbox *sb, enum view v);
enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
				  const char *method, const char *version, const char *upload,
				  size_t *upload_size, void **con_cls);
void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
			 enum MHD_RequestTerminationCode toe);

/* fake-create.c */
struct sandbox *create_sandbox(struct create_opts *o);
void create_opts_free(struct create_opts *o);
void handle_create(struct req *q, struct reply *r, int v2);

/* fake-lifecycle.c */
void handle_get(struct req *q, struct reply *r, const char *id);
void handle_kill(struct reply *r, const char *id);
void handle_connect(struct req *q, struct reply *r, const char *id, int resume_only);
void handle_pause(struct req *q, struct reply *r, const char *id);
void handle_timeout(struct req *q, struct reply *r, const char *id);
void handle_refresh(struct req *q, struct reply *r, const char *id);
void handle_network(struct req *q, struct reply *r, const char *id);
void handle_snapshot(struct req *q, struct reply *r, const char *id);
void handle_rollback(struct req *q, struct reply *r, const char *id);
void handle_fork(struct req *q, struct reply *r, const char *id);
void handle_metrics(struct reply *r, const char *id);
void handle_metrics_many(struct req *q, struct reply *r);
void handle_logs(struct reply *r, const char *id, int v2);

/* fake-listings.c */
int page_args(struct req *q, struct reply *r, long *limit, long *offset);
void next_token_header(struct reply *r, long next, const char *name);
void handle_list(struct req *q, struct reply *r, int v2);
void handle_list_snapshots(struct req *q, struct reply *r);

/* fake-templates.c */
void handle_v3_template(struct req *q, struct reply *r);
void handle_build_start(struct req *q, struct reply *r, const char *tid, const char *bid);
void handle_build_status(struct req *q, struct reply *r, const char *tid, const char *bid);
void handle_build_logs(struct reply *r, const char *tid, const char *bid);
void handle_e2b_templates_list(struct req *q, struct reply *r);
void handle_alias(struct reply *r, const char *alias);
void handle_template_delete(struct req *q, struct reply *r, const char *tid);
void handle_cube_template_create(struct req *q, struct reply *r);
void handle_cube_rebuild(struct req *q, struct reply *r, const char *tid, int need_body);
void handle_cube_build_status(struct reply *r, const char *tid, const char *job, int logs);
void handle_cube_template_get(struct reply *r, const char *tid);
void handle_cube_templates_list(struct reply *r);
void handle_cube_set_alias(struct req *q, struct reply *r, const char *tid);

/* fake-routes.c */
void classify(struct req *q);
void dispatch(struct req *q, struct reply *r);

/* fake-edge.c */
void *edge_main(void *arg);

#endif
