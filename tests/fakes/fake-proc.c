/* hangar-envd processes: spawning, pausing, resuming and killing a sandbox's process tree. */
#define _GNU_SOURCE
#include "fake-e2b.h"

void *spawner_main(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&g.sp_lock);
	for (;;) {
		struct spawn_req *r;
		int p[2], devnull;
		pid_t parent = getpid(), pid;

		while (!g.sp_queue && !g.sp_stop)
			pthread_cond_wait(&g.sp_cond, &g.sp_lock);
		if (!g.sp_queue)
			break;
		r = g.sp_queue;
		g.sp_queue = r->next;
		pthread_mutex_unlock(&g.sp_lock);

		r->pid = -1;
		r->ready_fd = -1;
		devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
		if (devnull >= 0 && pipe2(p, O_CLOEXEC) == 0) {
			pid = fork();
			if (pid == 0) {
				struct sigaction sa;
				sigset_t none;

				memset(&sa, 0, sizeof(sa));
				sa.sa_handler = SIG_DFL;
				sigaction(SIGPIPE, &sa, NULL);
				sigemptyset(&none);
				sigprocmask(SIG_SETMASK, &none, NULL);
				setpgid(0, 0);
				/* The spawner thread lives as long as the fake: its death means ours. */
				prctl(PR_SET_PDEATHSIG, SIGKILL);
				if (getppid() != parent)
					_exit(1);
				dup2(devnull, 0);
				dup2(r->log_fd >= 0 ? r->log_fd : devnull, 1);
				if (r->log_fd >= 0)
					dup2(r->log_fd, 2);
				if (p[1] == 3)
					fcntl(3, F_SETFD, 0);
				else
					dup2(p[1], 3);
				execv(r->argv[0], r->argv);
				_exit(127);
			}
			close(p[1]);
			if (pid < 0)
				close(p[0]);
			else {
				r->pid = pid;
				r->ready_fd = p[0];
			}
		}
		if (devnull >= 0)
			close(devnull);
		pthread_mutex_lock(&g.sp_lock);
		r->done = 1;
		pthread_cond_broadcast(&g.sp_cond);
	}
	pthread_mutex_unlock(&g.sp_lock);
	return NULL;
}

static void spawn_wait(struct spawn_req *r)
{
	pthread_mutex_lock(&g.sp_lock);
	r->next = NULL;
	{
		struct spawn_req **pp = &g.sp_queue;

		while (*pp)
			pp = &(*pp)->next;
		*pp = r;
	}
	pthread_cond_broadcast(&g.sp_cond);
	while (!r->done)
		pthread_cond_wait(&g.sp_cond, &g.sp_lock);
	pthread_mutex_unlock(&g.sp_lock);
}

/* Reads "ready <port>\n" from envd within the deadline. */
static int read_ready(int fd, int *port)
{
	char buf[64];
	size_t n = 0;
	int64_t deadline = clock_mono_ms() + READY_TIMEOUT_MS;

	while (n < sizeof(buf) - 1) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		int64_t left = deadline - clock_mono_ms();
		ssize_t r;
		int pr;

		if (left <= 0)
			return -1;
		pr = poll(&pfd, 1, (int)left);
		if (pr < 0 && errno == EINTR)
			continue;
		if (pr <= 0)
			return -1;
		r = read(fd, buf + n, sizeof(buf) - 1 - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		n += (size_t)r;
		buf[n] = '\0';
		if (strchr(buf, '\n'))
			return sscanf(buf, "ready %d", port) == 1 ? 0 : -1;
	}
	return -1;
}

struct pidset {
	pid_t *v;
	size_t n, cap;
};

static int pidset_has(const struct pidset *s, pid_t p)
{
	for (size_t i = 0; i < s->n; i++)
		if (s->v[i] == p)
			return 1;
	return 0;
}

static void pidset_push(struct pidset *s, pid_t p)
{
	if (s->n == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 64;
		pid_t *v = realloc(s->v, cap * sizeof(*v));

		if (!v)
			abort();
		s->v = v;
		s->cap = cap;
	}
	s->v[s->n++] = p;
}

static void pidset_add(struct pidset *s, pid_t p)
{
	if (!pidset_has(s, p))
		pidset_push(s, p);
}

static int environ_has(pid_t pid, const char *needle)
{
	char path[64], buf[65536];
	ssize_t n;
	int fd, found = 0;

	snprintf(path, sizeof(path), "/proc/%d/environ", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	for (char *p = buf; p < buf + n; p += strlen(p) + 1)
		if (strcmp(p, needle) == 0) {
			found = 1;
			break;
		}
	return found;
}

/*
 * Every process of a sandbox: envd, its descendants, and processes carrying
 * the sandbox's marker variable, with their descendants. Parents come before
 * their children.
 */
static void sandbox_tree(pid_t root, const char *marker, struct pidset *out)
{
	struct pidset all = { 0 }, parents = { 0 };
	DIR *d = opendir("/proc");
	struct dirent *de;
	pid_t self = getpid();
	int changed;

	out->n = 0;
	if (root > 0)
		pidset_add(out, root);
	if (!d)
		return;
	while ((de = readdir(d))) {
		char path[300], buf[512], *rp;
		long pid = strtol(de->d_name, &rp, 10);
		int ppid = 0, fd;
		ssize_t n;

		if (*rp || pid <= 1 || pid == self)
			continue;
		snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		n = read(fd, buf, sizeof(buf) - 1);
		close(fd);
		if (n <= 0)
			continue;
		buf[n] = '\0';
		rp = strrchr(buf, ')');
		if (!rp || sscanf(rp + 1, " %*c %d", &ppid) != 1)
			continue;
		pidset_push(&all, (pid_t)pid);
		pidset_push(&parents, (pid_t)ppid);
		if (marker && environ_has((pid_t)pid, marker))
			pidset_add(out, (pid_t)pid);
	}
	closedir(d);
	do {
		changed = 0;
		for (size_t i = 0; i < all.n; i++)
			if (!pidset_has(out, all.v[i]) && pidset_has(out, parents.v[i])) {
				pidset_add(out, all.v[i]);
				changed = 1;
			}
	} while (changed);
	free(all.v);
	free(parents.v);
}

static void marker_for(const struct sandbox *sb, char *out, size_t n)
{
	snprintf(out, n, "E2B_SANDBOX_ID=%s", sb->id);
}

/* SIGSTOP envd first, then everything it spawned, until no new process shows up. */
void stop_tree(struct sandbox *sb)
{
	struct pidset stopped = { 0 }, tree = { 0 };
	char marker[80];

	marker_for(sb, marker, sizeof(marker));
	if (sb->envd_pid > 0) {
		kill(sb->envd_pid, SIGSTOP);
		pidset_add(&stopped, sb->envd_pid);
	}
	for (int round = 0; round < 32; round++) {
		int added = 0;

		sandbox_tree(sb->envd_pid, marker, &tree);
		for (size_t i = 0; i < tree.n; i++)
			if (!pidset_has(&stopped, tree.v[i])) {
				kill(tree.v[i], SIGSTOP);
				pidset_add(&stopped, tree.v[i]);
				added = 1;
			}
		if (!added)
			break;
	}
	vlog("sandbox %s: stopped %zu processes", sb->id, stopped.n);
	free(stopped.v);
	free(tree.v);
}

/* SIGCONT deepest first, so no parent ever sees a stopped child. */
void cont_tree(struct sandbox *sb)
{
	struct pidset tree = { 0 };
	char marker[80];

	marker_for(sb, marker, sizeof(marker));
	sandbox_tree(sb->envd_pid, marker, &tree);
	for (size_t i = tree.n; i-- > 0;)
		kill(tree.v[i], SIGCONT);
	vlog("sandbox %s: continued %zu processes", sb->id, tree.n);
	free(tree.v);
}

void kill_tree(struct sandbox *sb)
{
	struct pidset tree = { 0 };
	char marker[80];

	marker_for(sb, marker, sizeof(marker));
	stop_tree(sb);
	sandbox_tree(sb->envd_pid, marker, &tree);
	for (size_t i = tree.n; i-- > 0;)
		kill(tree.v[i], SIGKILL);
	free(tree.v);
	if (sb->envd_pid > 0) {
		while (waitpid(sb->envd_pid, NULL, 0) < 0 && errno == EINTR)
			;
		vlog("sandbox %s: envd %d reaped", sb->id, (int)sb->envd_pid);
	}
}

void sb_log(struct sandbox *sb, const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	cJSON *e = cJSON_CreateObject();

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	cJSON_AddNumberToObject(e, "ms", (double)wall_ms());
	cJSON_AddStringToObject(e, "message", msg);
	cJSON_AddItemToArray(sb->logs, e);
	vlog("sandbox %s: %s", sb->id, msg);
}

/* Starts a fresh envd for the sandbox. Called without g.lock. */
int start_envd(struct sandbox *sb)
{
	char *argv[64 + 256];
	char *owned[256];
	int na = 0, no = 0, port = 0, log_fd = -1, rc = -1;
	struct spawn_req req = { 0 };
	char dir[PATH_MAX];

#define OWN(s) (owned[no++] = (s))
	argv[na++] = (char *)g.envd_path;
	argv[na++] = "-port";
	argv[na++] = "0";
	argv[na++] = "-addr";
	argv[na++] = "127.0.0.1";
	argv[na++] = "-ready-fd";
	argv[na++] = "3";
	argv[na++] = "-user";
	argv[na++] = g.user;
	argv[na++] = "-env";
	argv[na++] = "E2B_SANDBOX=true";
	argv[na++] = "-env";
	if (asprintf(&argv[na], "E2B_SANDBOX_ID=%s", sb->id) < 0)
		return -1;
	OWN(argv[na++]);
	argv[na++] = "-env";
	if (asprintf(&argv[na], "E2B_TEMPLATE_ID=%s", sb->template_id) < 0)
		goto out;
	OWN(argv[na++]);
	if (sb->env_vars) {
		cJSON *e;

		cJSON_ArrayForEach(e, sb->env_vars) {
			if (!cJSON_IsString(e) || no >= 250)
				continue;
			argv[na++] = "-env";
			if (asprintf(&argv[na], "%s=%s", e->string, e->valuestring) < 0)
				goto out;
			OWN(argv[na++]);
		}
	}
	if (g.state_dir) {
		char logp[PATH_MAX + 16];

		snprintf(dir, sizeof(dir), "%s/%s", g.state_dir, sb->id);
		if (mkdir(dir, 0755) < 0 && errno != EEXIST)
			goto out;
		argv[na++] = "-workdir";
		argv[na++] = dir;
		snprintf(logp, sizeof(logp), "%s/envd.log", dir);
		log_fd = open(logp, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	}
	if (g.verbose)
		argv[na++] = "-v";
	argv[na] = NULL;
#undef OWN

	req.argv = argv;
	req.log_fd = log_fd;
	spawn_wait(&req);
	if (req.pid < 0)
		goto out;
	if (read_ready(req.ready_fd, &port) < 0) {
		fprintf(stderr, "fake-e2b: envd for %s did not become ready\n", sb->id);
		kill(req.pid, SIGKILL);
		while (waitpid(req.pid, NULL, 0) < 0 && errno == EINTR)
			;
		close(req.ready_fd);
		goto out;
	}
	close(req.ready_fd);
	pthread_mutex_lock(&g.lock);
	sb->envd_pid = req.pid;
	sb->envd_port = port;
	sb_log(sb, "envd %d listening on 127.0.0.1:%d", (int)req.pid, port);
	pthread_mutex_unlock(&g.lock);
	rc = 0;
out:
	if (log_fd >= 0)
		close(log_fd);
	for (int i = 0; i < no; i++)
		free(owned[i]);
	return rc;
}
