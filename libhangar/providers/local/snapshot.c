/*
 * Snapshots of local sandboxes (snapshot.h): taken, used by creates, deleted.
 * An image sandbox's writable layer (the overlay's upper directory in its
 * jail's stage) is copied with its four trees, and its children run the
 * same image with it below their own.
 *
 * A snapshot is one copy of the sandbox's writable files, made while its
 * processes are frozen so that no file changes half-way; every sandbox made
 * from it shares that copy read-only under a writable layer of its own
 * (hangar-jail's snaplayer.c), so a fork of ten costs one copy, not ten.
 * Processes and memory are not kept: a sandbox from a snapshot boots afresh
 * on its files.
 *
 * A root caller's children see the layer through idmapped mounts into each
 * sandbox's own id range. An unprivileged caller with subordinate ids has
 * its snapshots owned in its image range instead, and their children run
 * there (snapshot-sub.c). Other callers (no subordinate ids: every file of
 * a sandbox is the caller's) have none, and local_capabilities() says so,
 * so that their session forks go by checkpoint instead.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "util/clock.h"
#include "util/sjson.h"
#include "lsnapuse.h"
#include "snapshot.h"

#define RECORD_MAX 65536
/* A .new-<id> directory left this long with its gate free: its maker died (the gate is taken just after mkdir). */
#define HALF_MADE_AGE_SEC 10

/* A snapshot this context holds (snapshot_held): its use lock, held shared until released. */
struct lhold {
	char id[LSNAP_ID_LEN + 1];
	int fd;
};

/* The writable trees of a sandbox: where the sandbox sees each, and its name in the layer. */
static const char *const trees[][2] = {
	{ "workspace", "workspace" }, { "home/user", "home" }, { "tmp", "tmp" }, { "root", "root" },
};

int local_snapshot_valid_id(const char *id)
{
	if (!id || strlen(id) != LSNAP_ID_LEN || strncmp(id, LSNAP_PREFIX, 5) != 0)
		return 0;
	for (const char *p = id + 5; *p; p++)
		if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
			return 0;
	return 1;
}

static void snap_dir(char *buf, size_t size, const struct local *l, const char *prefix, const char *id)
{
	snprintf(buf, size, "%s/snapshots/%s%s", l->root, prefix, id);
}

uint64_t local_capabilities(void *state)
{
	uint64_t caps = HANGAR_CAP_PAUSE | HANGAR_CAP_HOT_RESUME | HANGAR_CAP_PTY | HANGAR_CAP_IMAGES;

	return geteuid() == 0 || local_snapshot_sub_ok(state) ? caps | HANGAR_CAP_SNAPSHOT : caps;
}

/* The sandbox's host ids from its pid 1's uid_map: "0 BASE COUNT". 0, or -1. */
static int read_ids(int init, unsigned *base, unsigned *top)
{
	char path[64], *text;
	unsigned inside, b, count;
	int r = -1;

	snprintf(path, sizeof(path), "/proc/%d/uid_map", init);
	text = lstate_read_file(path, 4096, NULL);
	if (text && sscanf(text, "%u %u %u", &inside, &b, &count) == 3 && inside == 0 && count >= 2) {
		*base = b;
		*top = count - 1;
		r = 0;
	}
	free(text);
	return r;
}

static int write_record(const char *dir, const char *id, const char *name, const struct lmeta *m)
{
	char path[PATH_MAX], *text;
	cJSON *o = cJSON_CreateObject();
	int r = -ENOMEM;

	if (o && cJSON_AddStringToObject(o, "id", id) && cJSON_AddStringToObject(o, "name", name ? name : "") &&
	    cJSON_AddStringToObject(o, "parent", m->id) &&
	    cJSON_AddStringToObject(o, "template", m->template_id ? m->template_id : "local") &&
	    cJSON_AddBoolToObject(o, "network", m->network) &&
	    (!m->image.digest[0] || cJSON_AddStringToObject(o, "image", m->image.digest)) &&
	    cJSON_AddNumberToObject(o, "created_at_us", (double)clock_wall_us()) && (text = cJSON_Print(o))) {
		snprintf(path, sizeof(path), "%s/record.json", dir);
		r = lstate_write_atomic(path, text, strlen(text), 0600);
		free(text);
	}
	cJSON_Delete(o);
	return r;
}

/*
 * A new snapshot's id, and its directory laid out under .new-<id> in tmp
 * (DIR_MAX), its gate held in *gate while it is made: a sweep finds a
 * .new-<id> whose gate is free half-made by a maker that died. 0 or -errno.
 */
static int new_snapshot_dir(const struct local *l, char *id, char *tmp, int *gate)
{
	char path[PATH_MAX];
	int fd, rc;

	snprintf(path, sizeof(path), "%s/snapshots", l->root);
	if (mkdir(path, 0700) < 0 && errno != EEXIST)
		return -errno;
	memcpy(id, LSNAP_PREFIX, 5);
	if ((rc = lstate_random_hex(id + 5, 8)) < 0)
		return rc;
	snap_dir(tmp, DIR_MAX, l, ".new-", id);
	if (mkdir(tmp, 0700) < 0)
		return -errno;
	if ((*gate = lsnap_gate(tmp)) < 0)
		return -errno;
	snprintf(path, sizeof(path), "%s/use", tmp);
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return -errno;
	close(fd);
	snprintf(path, sizeof(path), "%s/layer", tmp);
	return mkdir(path, 0755) < 0 ? -errno : 0;
}

/* The sandbox's pid 1 on the host: the jail's child (bwrap), then bwrap's child. 0 when none. */
static int sandbox_init(int jail_pid)
{
	int pid = lstate_jail_child(jail_pid);

	return pid > 0 ? lstate_first_child(pid) : 0;
}

/* What copy_all copies, and where it failed. */
struct copy_job {
	int root, layer;
	int upper;   /* an image sandbox's writable layer (O_RDONLY); -1: none */
	int overlay; /* its attributes: 1 trusted.overlay.*, 2 user.overlay.* (unprivileged, userxattr) */
	unsigned base, top;
	const struct lsnap_ids *ids;
	size_t tree; /* the tree it failed at */
};

/* Copies each tree of the sandbox (root) into layer. 0, or -errno with why in msg and the tree in j->tree. */
static int copy_all(void *arg, char *msg, size_t size)
{
	struct copy_job *j = arg;
	int r = 0;

	msg[0] = '\0';
	for (j->tree = 0; r == 0 && j->tree < sizeof(trees) / sizeof(trees[0]); j->tree++) {
		/* The tree's own directory is a mount point, so the sandbox cannot have made it a link. */
		int src = openat(j->root, trees[j->tree][0], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

		if (src < 0) {
			r = -errno;
			snprintf(msg, size, "cannot open it: %s", strerror(errno));
			break;
		}
		r = local_snapshot_copy(src, j->layer, trees[j->tree][1], j->base, j->top, j->ids, 0, msg, size);
		close(src);
		if (r < 0)
			break;
	}
	/* Whiteouts and opaque directories included: the child's overlay must hide what the parent deleted. */
	if (r == 0 && j->upper >= 0)
		r = local_snapshot_copy(j->upper, j->layer, "upper", j->base, j->top, j->ids, j->overlay, msg, size);
	return r;
}

/* Where the copy of j failed, for its message. */
static const char *tree_name(const struct copy_job *j)
{
	return j->tree < sizeof(trees) / sizeof(trees[0]) ? trees[j->tree][0] : "(the image's writable layer)";
}

/*
 * An image sandbox's writable layer: the upper directory of the overlay its
 * jail built in the stage (hangar-jail's stage.c and image.c), seen through
 * bwrap, which runs in the stage's mount namespace. Opened O_RDONLY, or -1.
 */
static int open_upper(int jail_pid)
{
	char path[PATH_MAX];
	struct stat st;
	int bwrap = lstate_jail_child(jail_pid);

	/* The jail's stage_dir(): /run when the host has it, else /tmp. */
	snprintf(path, sizeof(path), "/proc/%d/root/%s/rw/upper", bwrap,
		 stat("/run", &st) == 0 && S_ISDIR(st.st_mode) ? "run" : "tmp");
	return bwrap > 0 ? open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) : -1;
}

/* copy_all in the child of snapshot-sub.c; the tree it failed at comes back in its message. */
static int copy_all_sub(void *arg, char *msg, size_t size)
{
	struct copy_job *j = arg;
	char why[400];
	int r = copy_all(arg, why, sizeof(why));

	if (r < 0)
		snprintf(msg, size, "/%s: %s", tree_name(j), why);
	return r;
}

/* Copies the frozen sandbox's trees (image: and its writable layer) into tmp/layer. 0, or an error set. */
static int copy_trees(const char *id, int jail_pid, int image, const char *tmp)
{
	char path[PATH_MAX], msg[512];
	struct lsnap_sub sub;
	int init = sandbox_init(jail_pid), unpriv = geteuid() != 0, planned = -1, e, r = 0;
	struct copy_job j = { .root = -1, .layer = -1, .upper = -1, .overlay = unpriv ? 2 : 1 };

	snprintf(path, sizeof(path), "/proc/%d/root", init);
	j.root = init > 0 ? open(path, O_PATH | O_DIRECTORY | O_CLOEXEC) : -1;
	if (j.root >= 0)
		planned = unpriv ? local_snapshot_sub_plan(init, &sub, msg, sizeof(msg))
				 : read_ids(init, &j.base, &j.top);
	/* Checked after opening: a pid reused since would not be the sandbox's. */
	if (j.root < 0 || !lstate_is_jail(jail_pid, id) || sandbox_init(jail_pid) != init || (planned < 0 && !unpriv)) {
		if (j.root >= 0)
			close(j.root);
		return hangar_sys_error(HANGAR_EGONE, 0, 0, "local sandbox %s ended while its snapshot was taken", id);
	}
	if (planned < 0) {
		close(j.root);
		return hangar_sys_error(HANGAR_EUNSUPPORTED, 0, 0, "local sandbox %s cannot be snapshotted: %s", id,
					msg);
	}
	if (image && (j.upper = open_upper(jail_pid)) < 0) {
		close(j.root);
		return hangar_sys_error(HANGAR_EGONE, 0, errno,
					"local sandbox %s: cannot open its image's writable layer", id);
	}
	snprintf(path, sizeof(path), "%s/layer", tmp);
	j.layer = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (j.layer < 0) {
		close(j.root);
		if (j.upper >= 0)
			close(j.upper);
		return hangar_sys_error(HANGAR_EOS, 0, errno, "cannot open %s", path);
	}
	if (unpriv) {
		j.ids = &sub.ids;
		e = local_snapshot_sub_run(&sub, copy_all_sub, &j, msg, sizeof(msg));
		if (e < 0)
			r = hangar_sys_error(e == -ENOSPC ? HANGAR_ECAPACITY : HANGAR_EOS, 0, -e,
					     "local sandbox %s: cannot copy into its snapshot %s", id, msg);
	} else if ((e = copy_all(&j, msg, sizeof(msg))) < 0) {
		r = hangar_sys_error(e == -ENOSPC ? HANGAR_ECAPACITY : HANGAR_EOS, 0, -e,
				     "local sandbox %s: cannot copy /%s into its snapshot: %s", id, tree_name(&j),
				     msg[0] ? msg : strerror(-e));
	}
	close(j.layer);
	close(j.root);
	if (j.upper >= 0)
		close(j.upper);
	return r;
}

/* Removes a snapshot's directory, through snapshot-sub.c's child when the caller is not root. 0 or -errno. */
static int remove_dir(const char *path)
{
	return geteuid() == 0 ? lstate_rmtree_at(AT_FDCWD, path) : local_snapshot_sub_rmtree(path);
}

/* This context's hold of snapshot snap (fd, its use lock held shared) recorded. 0 or -ENOMEM. */
static int hold_add(struct local *l, const char *snap, int fd)
{
	struct lhold *v;
	int r = 0;

	pthread_mutex_lock(&l->holds_lock);
	v = realloc(l->holds, (l->nholds + 1) * sizeof(*v));
	if (v) {
		l->holds = v;
		snprintf(v[l->nholds].id, sizeof(v[l->nholds].id), "%s", snap);
		v[l->nholds++].fd = fd;
	} else {
		r = -ENOMEM;
	}
	pthread_mutex_unlock(&l->holds_lock);
	return r;
}

/* Lets go of this context's hold of snapshot snap, if it has one. */
static void hold_drop(struct local *l, const char *snap)
{
	pthread_mutex_lock(&l->holds_lock);
	for (size_t i = 0; i < l->nholds; i++)
		if (!strcmp(l->holds[i].id, snap)) {
			close(l->holds[i].fd);
			l->holds[i] = l->holds[--l->nholds];
			break;
		}
	pthread_mutex_unlock(&l->holds_lock);
}

void local_snapshot_holds_init(struct local *l)
{
	pthread_mutex_init(&l->holds_lock, NULL);
}

/* Each snapshot still held goes as a release would have it: with the last sandbox made from it. */
void local_snapshot_holds_fini(struct local *l)
{
	char dir[DIR_MAX];

	for (size_t i = 0; i < l->nholds; i++) {
		close(l->holds[i].fd);
		snap_dir(dir, sizeof(dir), l, "", l->holds[i].id);
		local_snapshot_reap(l, dir);
	}
	free(l->holds);
	l->holds = NULL;
	l->nholds = 0;
	pthread_mutex_destroy(&l->holds_lock);
}

/*
 * A snapshot of sandbox id. held: released from the start (its mark laid
 * out with it), with its use lock taken shared before it is put in place
 * and kept until the release or the process's end. No reaper can take it
 * while that lock is held; whoever lets go of the last use after it (a
 * child's jail, the release, a list) removes it.
 */
static int take(struct local *l, const char *id, const char *name, hangar_buf *out_id, int held)
{
	char dir[DIR_MAX], tmp[DIR_MAX] = "", final[DIR_MAX] = "", snap[LSNAP_ID_LEN + 1], path[PATH_MAX];
	struct lmeta m = { 0 };
	int jail_pid = 0, lock = -1, gate = -1, use = -1, frozen = 0, renamed = 0, r, rc;
	int64_t t0 = clock_mono_us();

	if (geteuid() != 0 && !local_snapshot_sub_ok(l))
		return hangar_sys_error(HANGAR_EUNSUPPORTED, 0, 0,
					"local snapshots need a root caller or one with subordinate ids (uid %u has no "
					"image range in /etc/subuid and /etc/subgid to own a snapshot's files)",
					(unsigned)geteuid());
	rc = local_find_alive(l, id, dir, sizeof(dir), &jail_pid);
	if (rc)
		return rc;
	/* Exclusive: no pause, resume or other snapshot in between. */
	lock = local_lock(dir, LOCK_EX);
	if (lock < 0)
		return hangar_sys_error(HANGAR_EGONE, 0, errno, "local sandbox %s is gone", id);
	if ((r = lstate_meta_read(dir, &m)) < 0) {
		local_unlock(lock);
		return local_meta_failed(id, r);
	}
	if ((r = new_snapshot_dir(l, snap, tmp, &gate)) < 0) {
		rc = hangar_sys_error(HANGAR_EOS, 0, -r, "cannot make the directory of a snapshot of %s", id);
		goto out;
	}
	if (!m.paused) {
		if ((rc = local_set_frozen(id, dir, jail_pid, 1)) != 0)
			goto out;
		frozen = 1;
	}
	rc = copy_trees(id, jail_pid, m.image.digest[0] != '\0', tmp);
	if (frozen) {
		int trc = local_set_frozen(id, dir, jail_pid, 0);

		rc = rc ? rc : trc;
	}
	if (rc == 0 && (r = write_record(tmp, snap, name, &m)) < 0)
		rc = hangar_sys_error(HANGAR_EOS, 0, -r, "cannot write the record of snapshot %s", snap);
	if (rc == 0 && held) {
		snprintf(path, sizeof(path), "%s/%s", tmp, LSNAP_RELEASE);
		r = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
		if (r >= 0)
			close(r);
		snprintf(path, sizeof(path), "%s/use", tmp);
		if (r < 0 || (use = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)) < 0 || flock(use, LOCK_SH) < 0)
			rc = hangar_sys_error(HANGAR_EOS, 0, errno, "cannot hold snapshot %s", snap);
	}
	snap_dir(final, sizeof(final), l, "", snap);
	if (rc == 0 && rename(tmp, final) < 0)
		rc = hangar_sys_error(HANGAR_EOS, 0, errno, "cannot put snapshot %s in place", snap);
	else if (rc == 0)
		renamed = 1;
	if (rc == 0 && held) {
		if (hold_add(l, snap, use) < 0)
			rc = hangar_sys_error(HANGAR_ENOMEM, 0, ENOMEM, "out of memory");
		else
			use = -1;
	}
	if (rc == 0) {
		char *copy = strdup(snap);

		if (!copy) {
			rc = hangar_sys_error(HANGAR_ENOMEM, 0, ENOMEM, "out of memory");
		} else {
			hangar_buf_dispose(out_id);
			out_id->ptr = copy;
			out_id->size = strlen(copy);
			out_id->reserved = out_id->size + 1;
			hangar_sys_log(l->ctx, HANGAR_LOG_DEBUG, "local: snapshot %s of %s taken in %.1f ms%s", snap, id,
				       (double)(clock_mono_us() - t0) / 1000.0, held ? ", held until released" : "");
		}
	}
out:
	if (rc && held && renamed)
		hold_drop(l, snap);
	if (use >= 0)
		close(use);
	if (rc && tmp[0])
		remove_dir(renamed ? final : tmp);
	if (gate >= 0)
		close(gate);
	local_unlock(lock);
	lstate_meta_clear(&m);
	return rc;
}

int local_snapshot(void *state, const char *id, const char *name, hangar_buf *out_id)
{
	return take(state, id, name, out_id, 0);
}

int local_snapshot_held(void *state, const char *id, const char *name, hangar_buf *out_id)
{
	return take(state, id, name, out_id, 1);
}

/* record.json of snapshot dir: its network, and its image's digest ("" when none) in image. 0, or -errno. */
static int read_record(const char *dir, int *network, char *image, size_t size)
{
	const cJSON *im;
	char path[PATH_MAX], *text;
	cJSON *o;

	snprintf(path, sizeof(path), "%s/record.json", dir);
	text = lstate_read_file(path, RECORD_MAX, NULL);
	if (!text)
		return -errno;
	o = sjson_parse(text, strlen(text), 0, NULL, 0);
	free(text);
	if (!cJSON_IsObject(o) || !cJSON_IsBool(cJSON_GetObjectItemCaseSensitive(o, "network"))) {
		cJSON_Delete(o);
		return -EINVAL;
	}
	*network = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "network"));
	im = cJSON_GetObjectItemCaseSensitive(o, "image");
	if (im && (!cJSON_IsString(im) || strncmp(im->valuestring, "sha256:", 7) != 0 ||
		   strlen(im->valuestring) >= size)) {
		cJSON_Delete(o);
		return -EINVAL;
	}
	snprintf(image, size, "%s", im ? im->valuestring : "");
	cJSON_Delete(o);
	return 0;
}

int local_snapshot_use(const struct local *l, const struct hangar_create_opts *opts, struct lmeta *m,
		       struct image_rootfs *img, int *snap_fd)
{
	const char *id = opts->template_id;
	char dir[DIR_MAX], path[PATH_MAX], image[80];
	int network = 0, r;

	if (geteuid() != 0 && !local_snapshot_sub_ok(l))
		return hangar_sys_error(HANGAR_EUNSUPPORTED, 0, 0,
					"template \"%s\": local sandboxes from snapshots need a root caller or one "
					"with subordinate ids (an image range in /etc/subuid and /etc/subgid)", id);
	snap_dir(dir, sizeof(dir), l, "", id);
	snprintf(path, sizeof(path), "%s/use", dir);
	img->use_fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (img->use_fd < 0)
		return hangar_sys_error(HANGAR_ENOTFOUND, 0, errno, "the local provider has no snapshot \"%s\"", id);
	/* Shared, and not waited for: an exclusive holder is deleting it. */
	if (flock(img->use_fd, LOCK_SH | LOCK_NB) < 0)
		return hangar_sys_error(HANGAR_ENOTFOUND, 0, errno, "snapshot \"%s\" is being deleted", id);
	if ((r = read_record(dir, &network, image, sizeof(image))) < 0)
		return hangar_sys_error(HANGAR_ENOTFOUND, 0, -r, "snapshot \"%s\" has no valid record.json", id);
	if (image[0]) {
		/*
		 * A snapshot of an image sandbox: the child runs the same image,
		 * its writable layer the snapshot's upper/ over the image's
		 * layers. The image's use lock takes the snapshot's place in
		 * img; the snapshot's is held in *snap_fd all the same, so that
		 * a released snapshot cannot go before the jail holds it.
		 */
		*snap_fd = img->use_fd;
		img->use_fd = -1;
		if ((r = local_find_template(l, image, m, img)) < 0)
			return r;
	}
	if (opts->network != HANGAR_NETWORK_ON && opts->network != HANGAR_NETWORK_OFF)
		m->network = network;
	if (!(m->snapshot = strdup(dir)))
		return hangar_sys_error(HANGAR_ENOMEM, 0, ENOMEM, "out of memory");
	return 0;
}

int local_snapshot_delete(struct local *l, const char *id)
{
	char dir[DIR_MAX], gone[DIR_MAX], path[PATH_MAX];
	int gate, fd, r;

	snap_dir(dir, sizeof(dir), l, "", id);
	snap_dir(gone, sizeof(gone), l, LSNAP_DEL_PREFIX, id);
	hold_drop(l, id); /* deleting it is letting go of it */
	/* The gate: no reap of a released snapshot at the same time (lsnapuse.h). */
	gate = lsnap_gate(dir);
	if (gate < 0)
		return hangar_sys_error(HANGAR_EGONE, 0, errno, "the local provider has no snapshot %s", id);
	snprintf(path, sizeof(path), "%s/use", dir);
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0) {
		close(gate);
		return hangar_sys_error(HANGAR_EGONE, 0, errno, "the local provider has no snapshot %s", id);
	}
	if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		close(fd);
		close(gate);
		return hangar_sys_error(HANGAR_EBUSY, 0, EBUSY,
					"snapshot %s is in use by a sandbox made from it: kill those first", id);
	}
	/* Out of the way first, so that no create finds a half-removed snapshot. */
	r = rename(dir, gone) < 0 ? -errno : remove_dir(gone);
	close(fd);
	close(gate);
	if (r < 0)
		return hangar_sys_error(HANGAR_EOS, 0, -r, "cannot remove snapshot %s", id);
	return 0;
}

int local_snapshot_delete_slot(void *state, const char *snapshot_id)
{
	if (!local_snapshot_valid_id(snapshot_id))
		return hangar_sys_error(HANGAR_EGONE, 0, 0, "\"%s\" is not a local snapshot id (snap-<16 hex digits>)",
					snapshot_id);
	return local_snapshot_delete(state, snapshot_id);
}

/* dir's snapshot id, its last component. */
static const char *dir_id(const char *dir)
{
	const char *slash = strrchr(dir, '/');

	return slash ? slash + 1 : dir;
}

/* Reaps dir (lsnap_reap, flags LSNAP_*), and finishes its removal if it was left renamed. */
static void reap(struct local *l, const char *dir, int flags)
{
	char gone[DIR_MAX], mine[DIR_MAX];
	int r;

	/* Only a snapshot of this state directory, by the path it would have. */
	snap_dir(mine, sizeof(mine), l, "", dir_id(dir));
	if (!local_snapshot_valid_id(dir_id(dir)) || strcmp(mine, dir) != 0)
		return;
	r = lsnap_reap(dir, flags, remove_dir);
	if (r == -ENOENT) {
		/* Renamed already: by a jail that could not remove it, or a remover that died. */
		snap_dir(gone, sizeof(gone), l, LSNAP_DEL_PREFIX, dir_id(dir));
		r = lsnap_reap_leftover(gone, remove_dir);
	}
	if (r < 0)
		hangar_sys_log(l->ctx, HANGAR_LOG_WARNING, "local: cannot remove released snapshot %s: %s", dir_id(dir),
			       strerror(-r));
	else if (r > 0)
		hangar_sys_log(l->ctx, HANGAR_LOG_DEBUG, "local: released snapshot %s removed", dir_id(dir));
}

void local_snapshot_reap(struct local *l, const char *dir)
{
	reap(l, dir, 0);
}

void local_snapshot_sweep(struct local *l)
{
	char path[PATH_MAX];
	struct dirent *de;
	DIR *d;

	snprintf(path, sizeof(path), "%s/snapshots", l->root);
	if (!(d = opendir(path)))
		return;
	while ((de = readdir(d))) {
		const char *name = de->d_name;

		if (local_snapshot_valid_id(name)) {
			snap_dir(path, sizeof(path), l, "", name);
			snprintf(path + strlen(path), sizeof(path) - strlen(path), "/%s", LSNAP_RELEASE);
			if (access(path, F_OK) == 0) {
				snap_dir(path, sizeof(path), l, "", name);
				reap(l, path, LSNAP_NOWAIT);
			}
		} else {
			int removing = !strncmp(name, LSNAP_DEL_PREFIX, strlen(LSNAP_DEL_PREFIX)) &&
				       local_snapshot_valid_id(name + strlen(LSNAP_DEL_PREFIX));
			int half_made = !strncmp(name, ".new-", 5) && local_snapshot_valid_id(name + 5);
			struct stat st;
			int r = 0;

			if (!removing && !half_made)
				continue;
			snap_dir(path, sizeof(path), l, "", name);
			/* A half-made one only once its maker had time to take its gate. */
			if (removing || (lstat(path, &st) == 0 && S_ISDIR(st.st_mode) &&
					 st.st_ctime + HALF_MADE_AGE_SEC < time(NULL)))
				r = lsnap_reap_leftover(path, remove_dir);
			if (r < 0)
				hangar_sys_log(l->ctx, HANGAR_LOG_WARNING, "local: cannot finish removing %s: %s", path,
					       strerror(-r));
			else if (r > 0 && half_made)
				hangar_sys_log(l->ctx, HANGAR_LOG_DEBUG, "local: half-made snapshot %s removed", name + 5);
		}
	}
	closedir(d);
}

int local_snapshot_release_slot(void *state, const char *snapshot_id)
{
	struct local *l = state;
	char dir[DIR_MAX];
	int r;

	if (!local_snapshot_valid_id(snapshot_id))
		return hangar_sys_error(HANGAR_EGONE, 0, 0, "\"%s\" is not a local snapshot id (snap-<16 hex digits>)",
					snapshot_id);
	snap_dir(dir, sizeof(dir), l, "", snapshot_id);
	hold_drop(l, snapshot_id);
	r = lsnap_reap(dir, LSNAP_MARK, remove_dir);
	if (r == -ENOENT || r == -ENOTDIR)
		return hangar_sys_error(HANGAR_EGONE, 0, -r, "the local provider has no snapshot %s", snapshot_id);
	if (r < 0)
		return hangar_sys_error(HANGAR_EOS, 0, -r, "cannot release snapshot %s", snapshot_id);
	hangar_sys_log(l->ctx, HANGAR_LOG_DEBUG, "local: snapshot %s released%s", snapshot_id,
		       r ? " and removed" : "; it goes with the last sandbox made from it");
	return 0;
}

/* One snapshot as list reads it. */
struct listed {
	char id[LSNAP_ID_LEN + 1];
	char *name, *parent;
	int64_t created_at_us;
	int released;
};

/* Reads snapshot id's record into one. 0, or -1: not a complete snapshot (it is skipped). */
static int read_listed(const struct local *l, const char *id, struct listed *one)
{
	char path[PATH_MAX], *text;
	const cJSON *name, *parent, *at;
	cJSON *o;

	snap_dir(path, sizeof(path), l, "", id);
	snprintf(path + strlen(path), sizeof(path) - strlen(path), "/record.json");
	if (!(text = lstate_read_file(path, RECORD_MAX, NULL)))
		return -1;
	o = sjson_parse(text, strlen(text), 0, NULL, 0);
	free(text);
	name = cJSON_GetObjectItemCaseSensitive(o, "name");
	parent = cJSON_GetObjectItemCaseSensitive(o, "parent");
	at = cJSON_GetObjectItemCaseSensitive(o, "created_at_us");
	memset(one, 0, sizeof(*one));
	snprintf(one->id, sizeof(one->id), "%.*s", LSNAP_ID_LEN, id);
	one->name = strdup(cJSON_IsString(name) ? name->valuestring : "");
	one->parent = strdup(cJSON_IsString(parent) ? parent->valuestring : "");
	one->created_at_us = cJSON_IsNumber(at) ? (int64_t)at->valuedouble : 0;
	cJSON_Delete(o);
	snap_dir(path, sizeof(path), l, "", id);
	snprintf(path + strlen(path), sizeof(path) - strlen(path), "/%s", LSNAP_RELEASE);
	one->released = access(path, F_OK) == 0;
	if (!one->name || !one->parent) {
		free(one->name);
		free(one->parent);
		errno = ENOMEM;
		return -1;
	}
	return 0;
}

static int by_age(const void *a, const void *b)
{
	const struct listed *x = a, *y = b;

	if (x->created_at_us != y->created_at_us)
		return x->created_at_us < y->created_at_us ? -1 : 1;
	return strcmp(x->id, y->id);
}

int local_snapshot_list(void *state, int (*fn)(const struct hangar_snapshot_info *info, void *payload), void *payload)
{
	struct local *l = state;
	struct listed *v = NULL;
	size_t n = 0, cap = 0;
	char path[PATH_MAX];
	struct dirent *de;
	int rc = 0;
	DIR *d;

	/* What its last users left to go first, so that the list shows what stays. */
	local_snapshot_sweep(l);
	snprintf(path, sizeof(path), "%s/snapshots", l->root);
	if (!(d = opendir(path)))
		return errno == ENOENT ? 0 : hangar_sys_error(HANGAR_EOS, 0, errno, "cannot read %s", path);
	while (rc == 0 && (de = readdir(d))) {
		if (!local_snapshot_valid_id(de->d_name))
			continue;
		if (n == cap) {
			struct listed *nv = realloc(v, (cap ? 2 * cap : 16) * sizeof(*v));

			if (!nv) {
				rc = hangar_sys_error(HANGAR_ENOMEM, 0, ENOMEM, "out of memory");
				break;
			}
			v = nv;
			cap = cap ? 2 * cap : 16;
		}
		if (read_listed(l, de->d_name, &v[n]) == 0)
			n++;
		else if (errno == ENOMEM)
			rc = hangar_sys_error(HANGAR_ENOMEM, 0, ENOMEM, "out of memory");
		/* else: deleted meanwhile */
	}
	closedir(d);
	if (rc == 0 && n)
		qsort(v, n, sizeof(*v), by_age);
	for (size_t i = 0; rc == 0 && i < n; i++) {
		hangar_snapshot_info info = { HANGAR_SNAPSHOT_INFO_VERSION, sizeof(info), v[i].id, v[i].name,
					      v[i].parent, "local", v[i].created_at_us, (uint32_t)v[i].released, 0 };

		rc = fn(&info, payload);
	}
	for (size_t i = 0; i < n; i++) {
		free(v[i].name);
		free(v[i].parent);
	}
	free(v);
	return rc;
}
