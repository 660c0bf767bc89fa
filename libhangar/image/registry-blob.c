/*
 * Blobs: each fetched into blobs/sha256/<hex>.partial, hashed as it
 * arrives, and renamed only once its size and digest matched; one that is
 * already there is verified instead. Up to BLOB_WORKERS are fetched at
 * once by worker threads while the calling thread reports progress and
 * asks its cancel, so the caller's callbacks only run on its own thread.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "registry-int.h"

/* Blobs fetched at once: hashing is most of a blob's cost on loopback, so two layers hash on two CPUs. */
#define BLOB_WORKERS 3
/* How often the calling thread reports progress and asks its cancel while blobs arrive. */
#define PROGRESS_TICK_MS 50

struct blob_sink {
	struct fetch *f;
	struct job *job;
	const struct desc *d;
	int fd;
	crypto_hash_sha256_state st;
	uint64_t got;
	int rc;           /* why a callback stopped the transfer */
};

static int blob_body(void *ud, const char *data, size_t len)
{
	struct blob_sink *b = ud;
	size_t off = 0;

	if (b->got + len > b->d->size) {
		b->rc = herr(HANGAR_ETOOLARGE, HANGAR_ERRCAT_PROVIDER,
			     "registry %s: blob %s (%s) goes on past its %llu bytes", b->f->r.registry, b->d->digest,
			     b->d->what, (unsigned long long)b->d->size);
		return 1;
	}
	crypto_hash_sha256_update(&b->st, (const unsigned char *)data, len);
	while (off < len) {
		ssize_t w = write(b->fd, data + off, len - off);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			b->rc = herr_os(HANGAR_EFILE, w < 0 ? errno : EIO, "registry %s: writing blob %s (%s) under %s",
					b->f->r.registry, b->d->digest, b->d->what, b->f->dir);
			return 1;
		}
		off += (size_t)w;
	}
	b->got += len;
	__atomic_store_n(&b->job->got, b->got, __ATOMIC_RELAXED);
	return 0;
}

/* Resolves a Location against the URL it answered; the target's scheme and authority too. -1 when unusable. */
static int resolve_location(const char *base, const char *loc, char **out, char *scheme, char *authority)
{
	char bs[8], ba[300];

	*out = NULL;
	if (reg_url_split(loc, scheme, 8, authority, 300) == 0)
		return (*out = strdup(loc)) ? 0 : -1;
	if (loc[0] != '/' || loc[1] == '/' || reg_url_split(base, bs, sizeof(bs), ba, sizeof(ba)) != 0)
		return -1;
	snprintf(scheme, 8, "%s", bs);
	snprintf(authority, 300, "%s", ba);
	if (asprintf(out, "%s://%s%s", bs, ba, loc) < 0) {
		*out = NULL;
		return -1;
	}
	return 0;
}

int reg_blob_path(struct fetch *f, const char *digest, const char *suffix, char *out, size_t cap)
{
	if ((size_t)snprintf(out, cap, "%s/blobs/sha256/%s%s", f->dir, digest + 7, suffix) >= cap)
		return herr(HANGAR_EINVAL, HANGAR_ERRCAT_ARGUMENT, "the layout directory's path is too long: %s", f->dir);
	return 0;
}

/* 1 when path holds exactly the blob, 0 when it does not exist or is wrong (then it is deleted), < 0 on error. */
static int blob_present(struct fetch *f, const struct desc *d, const char *path)
{
	crypto_hash_sha256_state st;
	char got[DIGEST_LEN + 1], buf[1 << 16];
	struct stat sb;
	ssize_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);

	if (fd < 0) {
		if (errno == ENOENT)
			return 0;
		if (errno == ELOOP) {
			unlink(path);
			return 0;
		}
		return herr_os(HANGAR_EFILE, errno, "registry %s: cannot read %s", f->r.registry, path);
	}
	if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode) || (uint64_t)sb.st_size != d->size) {
		close(fd);
		goto wrong;
	}
	crypto_hash_sha256_init(&st);
	while ((n = read(fd, buf, sizeof(buf))) > 0)
		crypto_hash_sha256_update(&st, (unsigned char *)buf, (size_t)n);
	close(fd);
	if (n < 0)
		return herr_os(HANGAR_EFILE, errno, "registry %s: cannot read %s", f->r.registry, path);
	reg_digest_hex(&st, got);
	if (!strcmp(got, d->digest))
		return 1;
wrong:
	if (unlink(path) != 0 && errno != ENOENT)
		return herr_os(HANGAR_EFILE, errno, "registry %s: cannot remove the wrong blob %s", f->r.registry, path);
	return 0;
}

static int get_blob(struct fetch *f, struct job *job)
{
	const struct desc *d = job->d;
	char final[PATH_MAX], partial[PATH_MAX], what[200], got[DIGEST_LEN + 1];
	char *path = NULL, *target = NULL, scheme[8], authority[300], thost[256];
	struct blob_sink b;
	struct answer a;
	enum net_class c;
	int rc;

	memset(&a, 0, sizeof(a));
	if ((rc = reg_blob_path(f, d->digest, "", final, sizeof(final))) != 0 ||
	    (rc = reg_blob_path(f, d->digest, ".partial", partial, sizeof(partial))) != 0)
		return rc;
	if ((rc = blob_present(f, d, final)) != 0) {
		if (rc == 1) {
			pthread_mutex_lock(&f->lock);
			job->state = JOB_CACHED;
			pthread_mutex_unlock(&f->lock);
			return 0;
		}
		return rc;
	}
	memset(&b, 0, sizeof(b));
	b.f = f;
	b.job = job;
	b.d = d;
	b.fd = open(partial, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
	if (b.fd < 0)
		return herr_os(HANGAR_EFILE, errno, "registry %s: cannot create %s", f->r.registry, partial);
	crypto_hash_sha256_init(&b.st);
	snprintf(what, sizeof(what), "blob %s (%s)", d->digest, d->what);
	if (asprintf(&path, "/v2/%s/blobs/%s", f->r.name, d->digest) < 0) {
		path = NULL;
		rc = herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
		goto out;
	}
	c = reg_get(f, path, NULL, d->size ? d->size : 1, 0, blob_body, &b, what, &a, &rc);
	if (rc != 0)
		goto out;
	if (c == NET_HTTP_STATUS && (a.res.http_status == 301 || a.res.http_status == 302 || a.res.http_status == 303 ||
				     a.res.http_status == 307 || a.res.http_status == 308)) {
		char base[600];

		snprintf(base, sizeof(base), "%s://%s%s", f->scheme, f->r.api_host, path);
		if (resolve_location(base, a.location, &target, scheme, authority) != 0) {
			char q[200];

			reg_quote(q, sizeof(q), a.location, strlen(a.location));
			rc = herr(HANGAR_EPROTOCOL, HANGAR_ERRCAT_PROVIDER, "registry %s: %s is redirected to \"%s\", not an http(s) URL",
				  f->r.registry, what, q);
			goto out;
		}
		reg_host_only(authority, thost, sizeof(thost));
		/* Plain http only to loopback, and only from a registry reached over http itself. */
		if (strcmp(scheme, "https") && !(strcmp(f->scheme, "http") == 0 && reg_host_is_loopback(thost))) {
			rc = herr(HANGAR_EREFUSED, HANGAR_ERRCAT_PROVIDER,
				  "registry %s: %s is redirected to plain http at %s; a redirect is followed to https only",
				  f->r.registry, what, authority);
			goto out;
		}
		net_result_fini(&a.res);
		c = reg_perform(f, target, 0, NULL, d->size ? d->size : 1, 0, blob_body, &b, &a);
		if (c == NET_HTTP_STATUS && a.res.http_status >= 300 && a.res.http_status <= 399) {
			rc = herr_http(HANGAR_EPROTOCOL, HANGAR_ERRCAT_PROVIDER, a.res.http_status, NULL,
				       "registry %s: %s is redirected again by %s; one redirect is followed", f->r.registry,
				       what, authority);
			goto out;
		}
		if (c != NET_OK) {
			rc = reg_net_fail(f, &a, authority, what, b.rc ? b.rc : HANGAR_EPROTOCOL);
			goto out;
		}
	} else if (c != NET_OK) {
		rc = reg_net_fail(f, &a, f->r.api_host, what, b.rc ? b.rc : HANGAR_EPROTOCOL);
		goto out;
	}
	if (b.got != d->size) {
		rc = herr(HANGAR_EPROTOCOL, HANGAR_ERRCAT_PROVIDER, "registry %s: %s is %llu bytes, not the %llu its manifest says",
			  f->r.registry, what, (unsigned long long)b.got, (unsigned long long)d->size);
		goto out;
	}
	reg_digest_hex(&b.st, got);
	if (strcmp(got, d->digest) != 0) {
		rc = herr(HANGAR_EPROTOCOL, HANGAR_ERRCAT_PROVIDER, "registry %s: %s does not match its digest: its bytes are %s",
			  f->r.registry, what, got);
		goto out;
	}
	if (close(b.fd) != 0) {
		b.fd = -1;
		rc = herr_os(HANGAR_EFILE, errno, "registry %s: writing %s", f->r.registry, partial);
		goto out;
	}
	b.fd = -1;
	if (rename(partial, final) != 0) {
		rc = herr_os(HANGAR_EFILE, errno, "registry %s: cannot rename %s", f->r.registry, partial);
		goto out;
	}
	pthread_mutex_lock(&f->lock);
	job->state = JOB_FETCHED;
	pthread_mutex_unlock(&f->lock);
	rc = 0;
out:
	if (b.fd >= 0)
		close(b.fd);
	if (rc != 0)
		unlink(partial);
	net_result_fini(&a.res);
	free(target);
	free(path);
	return rc;
}

static void *blob_worker(void *arg)
{
	struct fetch *f = arg;

	for (;;) {
		struct job *j;
		int rc;

		pthread_mutex_lock(&f->lock);
		if (f->next_job >= f->njobs || __atomic_load_n(&f->stop, __ATOMIC_ACQUIRE)) {
			f->workers--;
			pthread_cond_signal(&f->cond);
			pthread_mutex_unlock(&f->lock);
			return NULL;
		}
		j = &f->jobs[f->next_job++];
		j->state = JOB_RUNNING;
		pthread_mutex_unlock(&f->lock);
		herr_clear();
		rc = get_blob(f, j);
		pthread_mutex_lock(&f->lock);
		if (rc != 0) {
			hangar_sys_error_save(&j->err);
			j->state = JOB_FAILED;
			/* The first failure is the one reported; the others only follow from the stop. */
			if (!f->failed)
				f->failed = j;
			__atomic_store_n(&f->stop, 1, __ATOMIC_RELEASE);
		} else {
			f->blobs_done++;
		}
		pthread_cond_signal(&f->cond);
		pthread_mutex_unlock(&f->lock);
	}
}

/* Progress since the last report, on the calling thread; non-zero when the caller cancels. */
static int report(struct fetch *f)
{
	const struct registry_progress *p = f->p;
	uint32_t done;

	pthread_mutex_lock(&f->lock);
	done = f->blobs_done;
	pthread_mutex_unlock(&f->lock);
	for (size_t i = 0; i < f->njobs && p && p->fn; i++) {
		struct job *j = &f->jobs[i];
		uint64_t got = __atomic_load_n(&j->got, __ATOMIC_RELAXED);
		enum job_state st;

		pthread_mutex_lock(&f->lock);
		st = j->state;
		pthread_mutex_unlock(&f->lock);
		if (st == JOB_CACHED && !j->announced) {
			j->announced = 1;
			if (p->fn(p->ud, "cached", j->d->digest, j->d->size, j->d->size, done, f->blobs_total))
				return 1;
		} else if (got != j->reported) {
			j->reported = got;
			if (p->fn(p->ud, "blob", j->d->digest, got, j->d->size, done, f->blobs_total))
				return 1;
		}
	}
	return p && p->cancel && p->cancel(p->ud);
}

/*
 * Fetches every blob with up to BLOB_WORKERS threads while the calling
 * thread reports progress and asks its cancel, so callbacks only ever run
 * where the caller is. The first failure is the one returned.
 */
int reg_fetch_blobs(struct fetch *f, const struct desc *d, size_t n)
{
	pthread_t tid[BLOB_WORKERS];
	size_t started = 0, want = n < BLOB_WORKERS ? n : BLOB_WORKERS;
	int cancelled = 0, rc = 0;

	f->jobs = calloc(n, sizeof(*f->jobs));
	if (!f->jobs)
		return herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
	for (size_t i = 0; i < n; i++)
		f->jobs[i].d = &d[i];
	f->njobs = n;
	pthread_mutex_lock(&f->lock);
	for (; started < want; started++) {
		if (pthread_create(&tid[started], NULL, blob_worker, f) != 0)
			break;
		f->workers++;
	}
	if (started == 0) {
		pthread_mutex_unlock(&f->lock);
		return herr(HANGAR_EOS, HANGAR_ERRCAT_OS, "registry %s: cannot start a thread to fetch blobs", f->r.registry);
	}
	while (f->workers > 0) {
		struct timespec until;

		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_nsec += PROGRESS_TICK_MS * 1000000L;
		if (until.tv_nsec >= 1000000000L) {
			until.tv_sec++;
			until.tv_nsec -= 1000000000L;
		}
		pthread_cond_timedwait(&f->cond, &f->lock, &until);
		pthread_mutex_unlock(&f->lock);
		if (!cancelled && report(f)) {
			cancelled = 1;
			__atomic_store_n(&f->stop, 1, __ATOMIC_RELEASE);
		}
		pthread_mutex_lock(&f->lock);
	}
	pthread_mutex_unlock(&f->lock);
	for (size_t i = 0; i < started; i++)
		pthread_join(tid[i], NULL);
	/* The last bytes, unless a failure ended it: then a cancel asked now must not hide it. */
	if (!cancelled && !f->failed && report(f))
		cancelled = 1;
	if (cancelled)
		rc = herr(HANGAR_ECANCELED, HANGAR_ERRCAT_NONE, "registry %s: the pull was cancelled", f->r.registry);
	else if (f->failed)
		rc = hangar_sys_error_restore(&f->failed->err);
	return rc;
}
