/*
 * Directory watches on inotify, for the filesystem service's WatchDir
 * stream and its CreateWatcher, GetWatcherEvents and RemoveWatcher calls.
 *
 * Each watcher owns an inotify instance, an eventfd that asks its thread to
 * stop, and a map from watch descriptors to directories relative to the
 * watched root. A recursive watch has one inotify watch per directory and
 * adds new ones as directories appear.
 *
 * Two kinds of consumers: a WatchDir stream, to which the thread sends each
 * event directly, and a CreateWatcher buffer that GetWatcherEvents drains.
 * Every live watcher is on one of two registry lists; whoever takes it off
 * (detach, RemoveWatcher or shutdown) is the one that stops and frees it.
 */
#define _GNU_SOURCE
#include "watch.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "creds.h"
#include "entry.h"
#include "pjson.h"
#include "request.h"

#define WATCH_MASK (IN_CREATE | IN_MOVED_TO | IN_DELETE | IN_DELETE_SELF | IN_MODIFY | \
		    IN_MOVED_FROM | IN_MOVE_SELF | IN_ATTRIB)
/* Unread events a CreateWatcher keeps before it gives up with an error. */
#define WATCH_BUFFER_MAX 100000
#define WATCHER_ID_LEN 21 /* "w" + 20 */

/* statfs magic numbers of the filesystems whose events are unreliable. */
#define MAGIC_NFS 0x6969
#define MAGIC_SMB 0x517B
#define MAGIC_CIFS 0xFF534D42
#define MAGIC_SMB2 0xFE534D42
#define MAGIC_FUSE 0x65735546

static const char keepalive_json[] = "{\"keepalive\":{}}";

struct wd_dir {
	int wd;
	char *rel; /* "" for the root */
};

struct watcher {
	struct watcher *next;        /* registry list, under reg_mu */
	char root[PATH_MAX];         /* cleaned absolute path */
	struct envd_user user;       /* whose credentials the thread runs with */
	int recursive;
	int include_entry;
	int ifd;
	int stopfd;
	pthread_t thread;
	int running;

	struct wd_dir *dirs;         /* sorted by wd; only the thread touches it once running */
	size_t ndirs;
	size_t capdirs;

	struct envd_stream *stream;  /* WatchDir: the stream (a reference), else NULL */

	/* CreateWatcher: the buffer, under mu. */
	char id[WATCHER_ID_LEN + 1];
	pthread_mutex_t mu;
	cJSON *events;
	size_t nevents;
	char *error;                 /* sticky once set */
};

static pthread_mutex_t reg_mu = PTHREAD_MUTEX_INITIALIZER;
static struct watcher *reg_streams;
static struct watcher *reg_buffered;
static int reg_closed;

/* ---- the descriptor map ------------------------------------------------- */

static size_t dir_pos(const struct watcher *w, int wd)
{
	size_t lo = 0, hi = w->ndirs;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (w->dirs[mid].wd < wd)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static const char *dir_rel(const struct watcher *w, int wd)
{
	size_t i = dir_pos(w, wd);

	return i < w->ndirs && w->dirs[i].wd == wd ? w->dirs[i].rel : NULL;
}

/* Records (or, for an inode watched already, renames) a directory. */
static int dir_set(struct watcher *w, int wd, const char *rel)
{
	size_t i = dir_pos(w, wd);
	char *copy = strdup(rel);

	if (!copy)
		return -ENOMEM;
	if (i < w->ndirs && w->dirs[i].wd == wd) {
		free(w->dirs[i].rel);
		w->dirs[i].rel = copy;
		return 0;
	}
	if (w->ndirs == w->capdirs) {
		size_t cap = w->capdirs ? w->capdirs * 2 : 16;
		struct wd_dir *d = realloc(w->dirs, cap * sizeof(*d));

		if (!d) {
			free(copy);
			return -ENOMEM;
		}
		w->dirs = d;
		w->capdirs = cap;
	}
	memmove(&w->dirs[i + 1], &w->dirs[i], (w->ndirs - i) * sizeof(*w->dirs));
	w->dirs[i] = (struct wd_dir){ .wd = wd, .rel = copy };
	w->ndirs++;
	return 0;
}

static void dir_drop_at(struct watcher *w, size_t i)
{
	free(w->dirs[i].rel);
	memmove(&w->dirs[i], &w->dirs[i + 1], (w->ndirs - i - 1) * sizeof(*w->dirs));
	w->ndirs--;
}

static void dir_forget(struct watcher *w, int wd)
{
	size_t i = dir_pos(w, wd);

	if (i < w->ndirs && w->dirs[i].wd == wd)
		dir_drop_at(w, i);
}

/* Stops watching rel and everything under it (a directory moved away). */
static void dir_unwatch_tree(struct watcher *w, const char *rel)
{
	size_t len = strlen(rel);

	for (size_t i = 0; i < w->ndirs;) {
		const char *r = w->dirs[i].rel;

		if (strncmp(r, rel, len) == 0 && (r[len] == '\0' || r[len] == '/')) {
			inotify_rm_watch(w->ifd, w->dirs[i].wd);
			dir_drop_at(w, i);
		} else {
			i++;
		}
	}
}

/* ---- delivering events -------------------------------------------------- */

enum { OP_CREATE, OP_RENAME, OP_CHMOD, OP_WRITE, OP_REMOVE, OP_COUNT };

static const char *const op_names[OP_COUNT] = {
	"EVENT_TYPE_CREATE", "EVENT_TYPE_RENAME", "EVENT_TYPE_CHMOD", "EVENT_TYPE_WRITE", "EVENT_TYPE_REMOVE",
};

static const uint32_t op_masks[OP_COUNT] = {
	IN_CREATE | IN_MOVED_TO, IN_MOVED_FROM | IN_MOVE_SELF, IN_ATTRIB, IN_MODIFY, IN_DELETE | IN_DELETE_SELF,
};

/* The watcher failed: end the stream, or make every later poll report it. */
static void watch_fail(struct watcher *w, const char *msg)
{
	if (w->stream) {
		envd_stream_end(w->stream, CONNECT_INTERNAL, msg);
		return;
	}
	pthread_mutex_lock(&w->mu);
	if (!w->error)
		w->error = strdup(msg);
	cJSON_Delete(w->events);
	w->events = NULL;
	w->nevents = 0;
	pthread_mutex_unlock(&w->mu);
}

/* Hands one FilesystemEvent on. Returns -1 when nobody will take more. */
static int deliver(struct watcher *w, cJSON *ev)
{
	int overflow = 0, rc = 0;

	if (w->stream) {
		cJSON *msg = cJSON_CreateObject();

		if (!msg) {
			cJSON_Delete(ev);
			return 0;
		}
		cJSON_AddItemToObject(msg, "filesystem", ev);
		return envd_stream_send(w->stream, msg);
	}
	pthread_mutex_lock(&w->mu);
	if (w->error) {
		rc = -1;
	} else if (w->nevents >= WATCH_BUFFER_MAX) {
		overflow = 1;
	} else {
		if (!w->events)
			w->events = cJSON_CreateArray();
		if (w->events) {
			cJSON_AddItemToArray(w->events, ev);
			w->nevents++;
			ev = NULL;
		}
	}
	pthread_mutex_unlock(&w->mu);
	cJSON_Delete(ev);
	if (overflow) {
		watch_fail(w, "watcher error: more than 100000 unread events");
		rc = -1;
	}
	return rc;
}

/* The absolute path of rel under the root. */
static int full_path(const struct watcher *w, const char *rel, char out[PATH_MAX])
{
	int n = snprintf(out, PATH_MAX, "%s/%s", w->root, rel);

	return n < 0 || n >= PATH_MAX ? -ENAMETOOLONG : 0;
}

static int emit(struct watcher *w, const char *rel, int op)
{
	cJSON *ev = cJSON_CreateObject();

	if (!ev)
		return 0;
	cJSON_AddStringToObject(ev, "name", rel);
	cJSON_AddStringToObject(ev, "type", op_names[op]);
	if (w->include_entry && (op == OP_CREATE || op == OP_WRITE || op == OP_CHMOD)) {
		char full[PATH_MAX];
		struct rpc_error err;
		cJSON *entry;

		entry = NULL;
		if (full_path(w, rel, full) == 0) {
			envd_clean_path(full);
			entry = envd_entry_info(full, &err);
		}
		if (entry) /* gone again already: the event goes without it */
			cJSON_AddItemToObject(ev, "entry", entry);
	}
	return deliver(w, ev);
}

/* ---- arming ------------------------------------------------------------- */

static int join_rel(char *out, size_t outsz, const char *dir, const char *name)
{
	int n = snprintf(out, outsz, "%s%s%s", dir, *dir ? "/" : "", name);

	return n < 0 || (size_t)n >= outsz ? -ENAMETOOLONG : 0;
}

/* Directories still to arm, relative to the root. */
struct todo {
	char **rels;
	size_t n;
	size_t cap;
};

static int todo_push(struct todo *t, const char *rel)
{
	char *copy = strdup(rel);

	if (!copy)
		return -ENOMEM;
	if (t->n == t->cap) {
		size_t cap = t->cap ? t->cap * 2 : 16;
		char **p = realloc(t->rels, cap * sizeof(*p));

		if (!p) {
			free(copy);
			return -ENOMEM;
		}
		t->rels = p;
		t->cap = cap;
	}
	t->rels[t->n++] = copy;
	return 0;
}

/* Watches one directory and queues its subdirectories (when recursive). */
static int watch_one(struct watcher *w, const char *rel, int announce, struct todo *t)
{
	char full[PATH_MAX], child[PATH_MAX], cfull[PATH_MAX];
	struct dirent **names;
	uint32_t mask = WATCH_MASK | IN_ONLYDIR | (*rel ? IN_DONT_FOLLOW : 0);
	int wd, n, rc = 0;

	if (full_path(w, rel, full) < 0)
		return -ENAMETOOLONG;
	wd = inotify_add_watch(w->ifd, full, mask);
	if (wd < 0)
		/* Vanished or replaced before we got to it: nothing to watch. */
		return *rel && (errno == ENOENT || errno == ENOTDIR || errno == ELOOP) ? 0 : -errno;
	rc = dir_set(w, wd, rel);
	if (rc < 0 || !w->recursive)
		return rc;
	n = scandir(full, &names, NULL, alphasort);
	if (n < 0)
		return *rel && errno == ENOENT ? 0 : -errno;
	for (int i = 0; i < n; i++) {
		const char *name = names[i]->d_name;
		struct stat st;

		if (rc == 0 && strcmp(name, ".") != 0 && strcmp(name, "..") != 0 &&
		    join_rel(child, sizeof(child), rel, name) == 0) {
			if (announce)
				emit(w, child, OP_CREATE);
			if (full_path(w, child, cfull) == 0 && lstat(cfull, &st) == 0 && S_ISDIR(st.st_mode))
				rc = todo_push(t, child);
		}
		free(names[i]);
	}
	free(names);
	return rc;
}

/*
 * Watches the directory rel and, when recursive, every directory below it,
 * iteratively (this also runs on small connection-thread stacks).
 * announce: report what is already inside as CREATE, for a directory that
 * was just made, whose first entries may predate its watch.
 */
static int watch_tree(struct watcher *w, const char *rel, int announce)
{
	struct todo t = { 0 };
	int rc = todo_push(&t, rel);

	while (rc == 0 && t.n) {
		char *dir = t.rels[--t.n];

		rc = watch_one(w, dir, announce, &t);
		free(dir);
	}
	while (t.n)
		free(t.rels[--t.n]);
	free(t.rels);
	return rc;
}

/* ---- the watcher thread ------------------------------------------------- */

/* Follows directories appearing and leaving, so a recursive watch keeps up. */
static void track_dirs(struct watcher *w, const struct inotify_event *ev, const char *rel)
{
	if (!w->recursive || !(ev->mask & IN_ISDIR) || !ev->len)
		return;
	if (ev->mask & IN_MOVED_FROM)
		dir_unwatch_tree(w, rel);
	if (ev->mask & (IN_CREATE | IN_MOVED_TO))
		/* Failures (the watch limit, most likely) leave that subtree unwatched;
		 * upstream does the same. */
		watch_tree(w, rel, (ev->mask & IN_CREATE) != 0);
}

/* One kernel event. Returns -1 when the watcher must stop. */
static int handle_event(struct watcher *w, const struct inotify_event *ev)
{
	const char *dir;
	char rel[PATH_MAX];

	if (ev->mask & IN_Q_OVERFLOW) {
		watch_fail(w, "watcher error: fsnotify: queue or buffer overflow");
		return -1;
	}
	if (ev->mask & IN_IGNORED) {
		dir_forget(w, ev->wd);
		return 0;
	}
	dir = dir_rel(w, ev->wd);
	if (!dir)
		return 0; /* a watch dropped a moment ago */
	if (ev->len) {
		if (join_rel(rel, sizeof(rel), dir, ev->name) < 0)
			return 0;
	} else if (*dir) {
		/* A subdirectory's own DELETE/MOVE_SELF: its parent reports it already. */
		return 0;
	} else {
		snprintf(rel, sizeof(rel), ".");
	}
	for (int op = 0; op < OP_COUNT; op++)
		if ((ev->mask & op_masks[op]) && emit(w, rel, op) < 0)
			return -1;
	track_dirs(w, ev, rel);
	return 0;
}

static void *watch_thread(void *arg)
{
	struct watcher *w = arg;
	char buf[64 * 1024] __attribute__((aligned(__alignof__(struct inotify_event))));
	struct envd_creds creds;

	/*
	 * New subdirectories are watched and EntryInfo is read here: as the
	 * user, for the whole life of the thread (it never serves anyone else).
	 */
	if (envd_creds_enter(&w->user, &creds) < 0) {
		watch_fail(w, "watcher error: cannot take the user's credentials");
		return NULL;
	}

	for (;;) {
		struct pollfd pfd[2] = {
			{ .fd = w->ifd, .events = POLLIN },
			{ .fd = w->stopfd, .events = POLLIN },
		};
		ssize_t n;

		if (poll(pfd, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			watch_fail(w, "watcher error: poll failed");
			break;
		}
		if (pfd[1].revents)
			break;
		n = read(w->ifd, buf, sizeof(buf));
		if (n < 0) {
			if (errno == EAGAIN || errno == EINTR)
				continue;
			watch_fail(w, "watcher error: reading inotify failed");
			break;
		}
		for (char *p = buf; p < buf + n;) {
			const struct inotify_event *ev = (const struct inotify_event *)p;

			if (handle_event(w, ev) < 0)
				return NULL;
			p += sizeof(*ev) + ev->len;
		}
	}
	return NULL;
}

/* ---- life cycle --------------------------------------------------------- */

static void watcher_free(struct watcher *w)
{
	if (w->ifd >= 0)
		close(w->ifd);
	if (w->stopfd >= 0)
		close(w->stopfd);
	for (size_t i = 0; i < w->ndirs; i++)
		free(w->dirs[i].rel);
	free(w->dirs);
	cJSON_Delete(w->events);
	free(w->error);
	pthread_mutex_destroy(&w->mu);
	if (w->stream)
		envd_stream_unref(w->stream);
	free(w);
}

/* Stops the thread (which may be blocked sending: the caller has made sure
 * the stream is closed or ending) and frees everything. */
static void watcher_stop(struct watcher *w)
{
	uint64_t one = 1;

	if (w->running) {
		/* An eventfd write only fails on overflow, which still leaves it readable. */
		ssize_t n = write(w->stopfd, &one, sizeof(one));

		(void)n;
		pthread_join(w->thread, NULL);
	}
	watcher_free(w);
}

static int is_network_fs(const char *path)
{
	struct statfs sf;

	if (statfs(path, &sf) < 0)
		return 0;
	switch ((unsigned long)sf.f_type & 0xffffffffUL) {
	case MAGIC_NFS:
	case MAGIC_SMB:
	case MAGIC_CIFS:
	case MAGIC_SMB2:
	case MAGIC_FUSE:
		return 1;
	}
	return 0;
}

struct watch_args {
	char path[PATH_MAX];
	struct envd_user user;
	int recursive;
	int include_entry;
	int allow_network;
};

static int parse_args(struct envd_req *r, const cJSON *in, struct watch_args *a, struct rpc_error *err)
{
	const char *p = "";

	memset(a, 0, sizeof(*a));
	if (pjson_string(in, "path", NULL, &p) < 0 ||
	    pjson_bool(in, "recursive", NULL, &a->recursive) < 0 ||
	    pjson_bool(in, "includeEntry", "include_entry", &a->include_entry) < 0 ||
	    pjson_bool(in, "allowNetworkMounts", "allow_network_mounts", &a->allow_network) < 0)
		return rpc_fail(err, CONNECT_INVALID_ARGUMENT, "invalid watch request");
	if (envd_resolve_path(&r->user, p, a->path, sizeof(a->path), err) < 0)
		return (int)err->code;
	a->user = r->user;
	return 0;
}

static int validate(const struct watch_args *a, struct rpc_error *err)
{
	struct stat st;

	if (stat(a->path, &st) < 0) {
		if (errno == ENOENT)
			return rpc_fail(err, CONNECT_NOT_FOUND, "path %s not found: %s", a->path, strerror(errno));
		return rpc_fail(err, envd_fs_code(errno), "error statting path %s: %s", a->path, strerror(errno));
	}
	if (!S_ISDIR(st.st_mode))
		return rpc_fail(err, CONNECT_INVALID_ARGUMENT, "path %s not a directory", a->path);
	if (!a->allow_network && is_network_fs(a->path))
		return rpc_fail(err, CONNECT_INVALID_ARGUMENT,
				"path %s is on a network filesystem; set allowNetworkMounts to watch it anyway",
				a->path);
	return 0;
}

/* Validates, then arms inotify on the whole tree; the thread is not started. */
static struct watcher *watcher_new(const struct watch_args *a, struct rpc_error *err)
{
	struct watcher *w;
	int rc;

	if (validate(a, err))
		return NULL;
	w = calloc(1, sizeof(*w));
	if (!w) {
		rpc_fail(err, CONNECT_INTERNAL, "out of memory");
		return NULL;
	}
	pthread_mutex_init(&w->mu, NULL);
	snprintf(w->root, sizeof(w->root), "%s", a->path);
	envd_clean_path(w->root);
	w->user = a->user;
	w->recursive = a->recursive;
	w->include_entry = a->include_entry;
	w->ifd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	w->stopfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (w->ifd < 0 || w->stopfd < 0) {
		rpc_fail(err, CONNECT_INTERNAL, "error creating watcher: %s", strerror(errno));
		watcher_free(w);
		return NULL;
	}
	rc = watch_tree(w, "", 0);
	if (rc < 0) {
		rpc_fail(err, envd_fs_code(-rc), "error adding path to watcher: %s: %s", w->root, strerror(-rc));
		watcher_free(w);
		return NULL;
	}
	return w;
}

static int watcher_start(struct watcher *w, struct rpc_error *err)
{
	int rc = pthread_create(&w->thread, NULL, watch_thread, w);

	if (rc != 0)
		return rpc_fail(err, CONNECT_INTERNAL, "error starting watcher: %s", strerror(rc));
	w->running = 1;
	return 0;
}

/* Puts w on a registry list, unless the service is shutting down. */
static int reg_add(struct watcher **list, struct watcher *w, struct rpc_error *err)
{
	pthread_mutex_lock(&reg_mu);
	if (reg_closed) {
		pthread_mutex_unlock(&reg_mu);
		return rpc_fail(err, CONNECT_UNAVAILABLE, "server is shutting down");
	}
	w->next = *list;
	*list = w;
	pthread_mutex_unlock(&reg_mu);
	return 0;
}

/* Takes w off a list; 1 when it was there. The caller holds reg_mu. */
static int reg_unlink(struct watcher **list, struct watcher *w)
{
	for (struct watcher **pp = list; *pp; pp = &(*pp)->next)
		if (*pp == w) {
			*pp = w->next;
			return 1;
		}
	return 0;
}

/* ---- WatchDir ----------------------------------------------------------- */

/* The connection is done with the stream: the watcher goes with it. */
static void stream_detached(struct envd_stream *s, void *ctx)
{
	struct watcher *w = ctx;
	int mine;

	(void)s;
	pthread_mutex_lock(&reg_mu);
	mine = reg_unlink(&reg_streams, w);
	pthread_mutex_unlock(&reg_mu);
	if (mine)
		watcher_stop(w);
}

int watch_rpc_watch_dir(struct envd_req *r, const cJSON *in, struct envd_stream *s, struct rpc_error *err)
{
	struct watch_args a;
	struct watcher *w;
	cJSON *start;

	if (parse_args(r, in, &a, err))
		return (int)err->code;
	w = watcher_new(&a, err);
	if (!w)
		return (int)err->code;
	envd_stream_set_keepalive(s, keepalive_json);
	if (r->timeout_ms > 0)
		envd_stream_set_deadline_ms(s, r->timeout_ms);
	/* Armed already, so anything after the client sees start is reported. */
	start = cJSON_CreateObject();
	cJSON_AddObjectToObject(start, "start");
	envd_stream_send(s, start);

	envd_stream_ref(s);
	w->stream = s;
	if (watcher_start(w, err) || reg_add(&reg_streams, w, err)) {
		/* Ending releases the thread should it be waiting on the client. */
		envd_stream_end(s, err->code, err->message);
		watcher_stop(w);
		return (int)err->code;
	}
	/* The connection only calls this after the handler returns. */
	envd_stream_set_detach(s, stream_detached, w);
	return 0;
}

/* ---- CreateWatcher family ----------------------------------------------- */

/* "w" and 20 characters of [a-z0-9], unbiased. */
static int make_id(char out[WATCHER_ID_LEN + 1])
{
	static const char alphabet[] = "abcdefghijklmnopqrstuvwxyz0123456789";
	size_t n = 1;

	out[0] = 'w';
	while (n < WATCHER_ID_LEN) {
		unsigned char rnd[32];

		if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
			return -1;
		for (size_t i = 0; i < sizeof(rnd) && n < WATCHER_ID_LEN; i++)
			if (rnd[i] < 252) /* 252 = 7 * 36 */
				out[n++] = alphabet[rnd[i] % 36];
	}
	out[n] = '\0';
	return 0;
}

/* A registered CreateWatcher by id; the caller holds reg_mu. */
static struct watcher *find_buffered(const char *id)
{
	for (struct watcher *w = reg_buffered; w; w = w->next)
		if (strcmp(w->id, id) == 0)
			return w;
	return NULL;
}

int watch_rpc_create(struct envd_req *r, const cJSON *in, cJSON **out, struct rpc_error *err)
{
	struct watch_args a;
	struct watcher *w;

	if (parse_args(r, in, &a, err))
		return (int)err->code;
	w = watcher_new(&a, err);
	if (!w)
		return (int)err->code;
	if (make_id(w->id) < 0) {
		watcher_free(w);
		return rpc_fail(err, CONNECT_INTERNAL, "cannot generate a watcher id");
	}
	if (watcher_start(w, err) || reg_add(&reg_buffered, w, err)) {
		watcher_stop(w);
		return (int)err->code;
	}
	*out = cJSON_CreateObject();
	cJSON_AddStringToObject(*out, "watcherId", w->id);
	return 0;
}

static int watcher_id(const cJSON *in, const char **id, struct rpc_error *err)
{
	*id = "";
	if (pjson_string(in, "watcherId", "watcher_id", id) < 0)
		return rpc_fail(err, CONNECT_INVALID_ARGUMENT, "invalid watcherId");
	return 0;
}

int watch_rpc_get_events(struct envd_req *r, const cJSON *in, cJSON **out, struct rpc_error *err)
{
	const char *id;
	struct watcher *w;
	cJSON *events = NULL;
	int rc = 0;

	(void)r;
	if (watcher_id(in, &id, err))
		return (int)err->code;
	/* Holding reg_mu keeps RemoveWatcher from freeing w under us. */
	pthread_mutex_lock(&reg_mu);
	w = find_buffered(id);
	if (!w) {
		rc = rpc_fail(err, CONNECT_NOT_FOUND, "watcher with id %s not found", id);
	} else {
		pthread_mutex_lock(&w->mu);
		if (w->error) {
			rc = rpc_fail(err, CONNECT_INTERNAL, "%s", w->error);
		} else {
			events = w->events;
			w->events = NULL;
			w->nevents = 0;
		}
		pthread_mutex_unlock(&w->mu);
	}
	pthread_mutex_unlock(&reg_mu);
	if (rc)
		return rc;
	*out = cJSON_CreateObject();
	if (events)
		cJSON_AddItemToObject(*out, "events", events);
	return 0;
}

int watch_rpc_remove(struct envd_req *r, const cJSON *in, cJSON **out, struct rpc_error *err)
{
	const char *id;
	struct watcher *w;

	(void)r;
	if (watcher_id(in, &id, err))
		return (int)err->code;
	pthread_mutex_lock(&reg_mu);
	w = find_buffered(id);
	if (w)
		reg_unlink(&reg_buffered, w);
	pthread_mutex_unlock(&reg_mu);
	if (!w)
		return rpc_fail(err, CONNECT_NOT_FOUND, "watcher with id %s not found", id);
	watcher_stop(w);
	*out = cJSON_CreateObject();
	return 0;
}

/* ---- the service -------------------------------------------------------- */

int watch_service_init(void)
{
	pthread_mutex_lock(&reg_mu);
	reg_closed = 0;
	pthread_mutex_unlock(&reg_mu);
	return 0;
}

void watch_service_shutdown(void)
{
	struct watcher *streams, *buffered, *next;

	pthread_mutex_lock(&reg_mu);
	reg_closed = 1;
	streams = reg_streams;
	buffered = reg_buffered;
	reg_streams = reg_buffered = NULL;
	pthread_mutex_unlock(&reg_mu);
	for (struct watcher *w = streams; w; w = next) {
		next = w->next;
		/* Ending first releases a thread blocked on a slow client. */
		envd_stream_end(w->stream, CONNECT_UNAVAILABLE, "server is shutting down");
		watcher_stop(w);
	}
	for (struct watcher *w = buffered; w; w = next) {
		next = w->next;
		watcher_stop(w);
	}
}
