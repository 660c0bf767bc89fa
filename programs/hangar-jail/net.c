/*
 * Network "on": the sandbox has a network namespace of its own (bwrap
 * --unshare-net, as for "off") and slirp4netns gives it outbound TCP and UDP
 * through the host's sockets: a user-mode stack, so the sandbox shares no
 * interface, no loopback and no unix socket table with the host or another
 * sandbox.
 *
 * slirp4netns runs with --disable-host-loopback (its gateway does not lead
 * to the host's 127.0.0.1), in a sandbox and seccomp filter of its own.
 * What it would still reach from the host, the host's own
 * addresses and the private, link-local and shared ranges (other machines
 * and services of the host's networks, cloud metadata at 169.254.169.254),
 * is made unreachable by blackhole routes in the sandbox's namespace, which
 * its root cannot change (it keeps no CAP_NET_ADMIN); the on-link subnet's
 * route is replaced by a route to the gateway alone. HANGAR_JAIL_NET_ALLOW
 * (comma-separated CIDR ranges, from HANGAR_LOCAL_NET_ALLOW) are routed
 * through the gateway again. DNS goes to NET_DNS_ADDR, which slirp4netns
 * forwards to the host's resolver. IPv4 only.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <limits.h>
#include <linux/nsfs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "jail.h"
#include "lstate.h"

#define NET_DEADLINE_MS 5000

static const char *const blocked[] = {
	"0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16", "172.16.0.0/12",
	"192.0.0.0/24", "192.0.2.0/24", "192.168.0.0/16", "198.18.0.0/15", "198.51.100.0/24", "203.0.113.0/24",
	"224.0.0.0/4", "240.0.0.0/4",
};

int net_enter(int userns, int netns)
{
	/* Entering a user namespace gives every capability in it: enough for
	 * the routes, whatever the caller's uid is there. */
	if (userns >= 0 && syscall(SYS_setns, userns, CLONE_NEWUSER) < 0)
		return -1;
	return (int)syscall(SYS_setns, netns, CLONE_NEWNET);
}

/* The sandbox's pid 1 from bwrap's --info-fd JSON ({"child-pid": N, ...}), within deadline. */
static int read_child_pid(int fd, int64_t deadline)
{
	char buf[1024];
	size_t have = 0;

	while (have < sizeof(buf) - 1) {
		struct pollfd p = { fd, POLLIN, 0 };
		int64_t left = deadline - clock_mono_ms();
		ssize_t n;
		char *k;

		buf[have] = '\0';
		if ((k = strstr(buf, "\"child-pid\"")) && strchr(k, ','))
			return atoi(strchr(k, ':') + 1);
		if (left <= 0 || poll(&p, 1, (int)left) <= 0)
			break;
		n = read(fd, buf + have, sizeof(buf) - 1 - have);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		have += (size_t)n;
	}
	buf[have] = '\0';
	{
		char *k = strstr(buf, "\"child-pid\"");

		return k && strchr(k, ':') ? atoi(strchr(k, ':') + 1) : -1;
	}
}

static int valid_cidr(const char *s)
{
	char addr[32];
	unsigned bits;
	struct in_addr a;

	return sscanf(s, "%31[0-9.]/%u", addr, &bits) == 2 && bits <= 32 && inet_pton(AF_INET, addr, &a) == 1;
}

/* Waits for one byte on fd (slirp4netns's --ready-fd) before deadline. 0 or -1. */
static int wait_ready(int fd, int64_t deadline)
{
	for (;;) {
		struct pollfd p = { fd, POLLIN, 0 };
		int64_t left = deadline - clock_mono_ms();
		char c;
		ssize_t n;

		if (left <= 0 || poll(&p, 1, (int)left) <= 0)
			return -1;
		n = read(fd, &c, 1);
		if (n < 0 && errno == EINTR)
			continue;
		return n == 1 ? 0 : -1;
	}
}

/*
 * bwrap's child brings its loopback up in the new namespace; a second
 * process configuring the namespace meanwhile can make that fail, so
 * slirp4netns starts once 127.0.0.1 is there. 0, or -1 said.
 */
static int wait_loopback(int child, int64_t deadline)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/%d/net/fib_trie", child);
	for (;;) {
		FILE *f = fopen(path, "re");
		char line[256];
		int up = 0;

		while (f && !up && fgets(line, sizeof(line), f))
			up = strstr(line, "127.0.0.1") != NULL;
		if (f)
			fclose(f);
		if (up)
			return 0;
		if (clock_mono_ms() >= deadline || !f) {
			say("the sandbox's loopback did not come up");
			return -1;
		}
		poll(NULL, 0, 2);
	}
}

/* The pipe whose closing ends slirp4netns (its --exit-fd): [0] is its, [1] the jail's. */
static int slirp_exit_pipe[2] = { -1, -1 };

/*
 * Starts slirp4netns on child's network namespace and waits until it has
 * configured it. *netfd: that namespace; *ownerfd: its owner, which an
 * unprivileged jail enters too (-1 as root). slirp4netns's pid, or -1 (said
 * where it is not plain) with both descriptors closed.
 */
static pid_t start_slirp(const char *slirp, int child, int *netfd, int *ownerfd, int64_t deadline)
{
	char pid[32], ready[48], exitfd[48], userns[64], nsnet[64];
	char *slirp_argv[13];
	size_t sa = 0;
	int rp[2];
	pid_t p;

	if (pipe2(rp, O_CLOEXEC) < 0)
		return -1;
	/*
	 * slirp4netns ends when the read end it holds sees the write end close:
	 * the jail keeps that one (close-on-exec, so no child of ours holds it)
	 * until it dies, however it dies.
	 */
	if (slirp_exit_pipe[0] < 0 && pipe2(slirp_exit_pipe, O_CLOEXEC) < 0) {
		close(rp[0]);
		close(rp[1]);
		return -1;
	}
	snprintf(pid, sizeof(pid), "%d", child);
	snprintf(ready, sizeof(ready), "--ready-fd=%d", rp[1]);
	snprintf(exitfd, sizeof(exitfd), "--exit-fd=%d", slirp_exit_pipe[0]);
	/*
	 * Unprivileged, the network namespace belongs to bwrap's user namespace,
	 * which must be entered too: its owner (the sandbox itself may already be
	 * one namespace further down, for --disable-userns), by our descriptor.
	 */
	snprintf(nsnet, sizeof(nsnet), "/proc/%d/ns/net", child);
	*netfd = open(nsnet, O_RDONLY | O_CLOEXEC);
	if (geteuid() != 0 || *netfd < 0) {
		*ownerfd = *netfd >= 0 ? ioctl(*netfd, NS_GET_USERNS) : -1;
		if (*ownerfd < 0) {
			say("cannot find the owner of the sandbox's network namespace: %s", strerror(errno));
			if (*netfd >= 0)
				close(*netfd);
			*netfd = -1;
			close(rp[0]);
			close(rp[1]);
			return -1;
		}
	}
	/* Inherited by slirp4netns, which opens it as its own (this process is not dumpable). */
	if (*ownerfd >= 0)
		fcntl(*ownerfd, F_SETFD, 0);
	snprintf(userns, sizeof(userns), "--userns-path=/proc/self/fd/%d", *ownerfd);
	slirp_argv[sa++] = (char *)slirp;
	/* Unprivileged, the namespace belongs to bwrap's user namespace, which must be entered too. */
	if (geteuid() != 0)
		slirp_argv[sa++] = userns;
	slirp_argv[sa++] = "--configure";
	slirp_argv[sa++] = "--mtu=65520";
	slirp_argv[sa++] = "--disable-host-loopback";
	slirp_argv[sa++] = "--enable-sandbox";
	slirp_argv[sa++] = "--enable-seccomp";
	slirp_argv[sa++] = ready;
	slirp_argv[sa++] = exitfd;
	slirp_argv[sa++] = pid;
	slirp_argv[sa++] = NET_IF;
	slirp_argv[sa] = NULL;
	p = fork();
	if (p == 0) {
		sigset_t none;

		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		/* And, should the exit pipe fail it, when the jail dies. */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (fcntl(rp[1], F_SETFD, 0) < 0 || fcntl(slirp_exit_pipe[0], F_SETFD, 0) < 0)
			_exit(126);
		close(slirp_exit_pipe[1]);
		execv(slirp, slirp_argv);
		say("cannot run %s: %s", slirp, strerror(errno));
		_exit(127);
	}
	close(rp[1]);
	if (p < 0 || wait_ready(rp[0], deadline) < 0) {
		close(rp[0]);
		if (*ownerfd >= 0)
			close(*ownerfd);
		if (*netfd >= 0)
			close(*netfd);
		*ownerfd = *netfd = -1;
		say("slirp4netns did not configure the sandbox's network in time");
		if (p > 0) {
			kill(p, SIGKILL);
			waitpid(p, NULL, 0);
		}
		return -1;
	}
	close(rp[0]);
	return p;
}

/* One route, in network byte order. */
static int route_add(struct net_route *v, size_t *n, size_t cap, const char *cidr, enum net_route_kind kind,
		     int replace)
{
	char addr[INET_ADDRSTRLEN];
	const char *slash = strchr(cidr, '/');
	size_t len = slash ? (size_t)(slash - cidr) : strlen(cidr);

	if (*n == cap || len >= sizeof(addr))
		return -1;
	memcpy(addr, cidr, len);
	addr[len] = '\0';
	v[*n] = (struct net_route){ .kind = kind, .replace = replace, .prefix = slash ? atoi(slash + 1) : 32 };
	if (inet_pton(AF_INET, addr, &v[*n].dst) != 1 || v[*n].prefix < 0 || v[*n].prefix > 32 ||
	    inet_pton(AF_INET, NET_GW, &v[*n].gateway) != 1)
		return -1;
	(*n)++;
	return 0;
}

/*
 * The routes that restrict the sandbox: the gateway and the resolver alone
 * on the link, every blocked range and the host's own addresses
 * blackholed, HANGAR_JAIL_NET_ALLOW routed again. Their number, or -1 when
 * they do not fit.
 */
static int route_list(struct net_route *v, size_t cap)
{
	const char *allow = getenv("HANGAR_JAIL_NET_ALLOW");
	struct ifaddrs *ifs = NULL;
	size_t n = 0;
	int rc = 0;

	rc |= route_add(v, &n, cap, NET_GW, NET_ROUTE_LINK, 0);
	rc |= route_add(v, &n, cap, NET_DNS_ADDR, NET_ROUTE_LINK, 0);
	for (size_t i = 0; i < sizeof(blocked) / sizeof(blocked[0]); i++)
		rc |= route_add(v, &n, cap, blocked[i], NET_ROUTE_BLACKHOLE, 0);
	if (getifaddrs(&ifs) == 0) {
		for (struct ifaddrs *i = ifs; i; i = i->ifa_next) {
			char a[INET_ADDRSTRLEN];

			if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET)
				continue;
			inet_ntop(AF_INET, &((struct sockaddr_in *)i->ifa_addr)->sin_addr, a, sizeof(a));
			rc |= route_add(v, &n, cap, a, NET_ROUTE_BLACKHOLE, 1);
		}
		freeifaddrs(ifs);
	}
	while (allow && *allow) {
		char cidr[64];
		size_t len = strcspn(allow, ",");

		snprintf(cidr, sizeof(cidr), "%.*s", (int)(len < 63 ? len : 63), allow);
		if (valid_cidr(cidr))
			rc |= route_add(v, &n, cap, cidr, NET_ROUTE_VIA, 1);
		else
			say("HANGAR_JAIL_NET_ALLOW: \"%s\" is not an IPv4 CIDR range; ignored", cidr);
		allow += len;
		if (*allow == ',')
			allow++;
	}
	return rc ? -1 : (int)n;
}

pid_t net_setup(int fd, int from_child, pid_t pid, const char *slirp, int64_t deadline)
{
	struct net_route routes[NET_ROUTES_MAX];
	int n_routes;
	int child = -1, netfd = -1, ownerfd = -1;
	pid_t p;

	if (from_child) {
		/*
		 * The child made the namespace, loopback up, before it runs bwrap,
		 * which makes none: slirp4netns configures it while bwrap sets the
		 * sandbox up. The child's pid stays bwrap's. A child that died
		 * instead wrote nothing: EOF; one never let go on has no pipe.
		 */
		if (fd < 0 || wait_ready(fd, deadline) < 0) {
			say("the sandbox's network namespace was not made");
			return -1;
		}
		child = pid;
	} else {
		child = read_child_pid(fd, deadline);
		if (child <= 0) {
			say("bwrap did not report the sandbox's pid");
			return -1;
		}
		if (wait_loopback(child, deadline) < 0)
			return -1;
	}
	mark("net-loopback");
	p = start_slirp(slirp, child, &netfd, &ownerfd, deadline);
	if (p < 0)
		return -1;
	mark("net-slirp");
	n_routes = route_list(routes, NET_ROUTES_MAX);
	if (n_routes < 0 || net_routes_apply(routes, (size_t)n_routes, NET_IF, ownerfd, netfd) < 0) {
		say("cannot restrict the sandbox's routes");
		kill(p, SIGKILL);
		waitpid(p, NULL, 0);
		p = -1;
	}
	if (ownerfd >= 0)
		close(ownerfd);
	if (netfd >= 0)
		close(netfd);
	return p;
}

/*
 * As root of the sandbox's user namespace: the sandbox's network namespace,
 * made here rather than by bwrap so that it can be set up as that root
 * before anything runs in it: loopback up (as bwrap would), and every port
 * free to bind. Commands run in the namespace below, where
 * CAP_NET_BIND_SERVICE does not reach this network namespace: without it
 * the sandbox's root could no longer serve on port 80. 0, or -1 said.
 */
int own_netns(void)
{
	struct ifreq ifr = { 0 };
	int s;

	if (unshare(CLONE_NEWNET) < 0) {
		say("cannot make the sandbox's network namespace: %s", strerror(errno));
		return -1;
	}
	s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "lo");
	if (s < 0 || ioctl(s, SIOCGIFFLAGS, &ifr) < 0 ||
	    (ifr.ifr_flags |= IFF_UP | IFF_RUNNING, ioctl(s, SIOCSIFFLAGS, &ifr)) < 0) {
		say("cannot bring the sandbox's loopback up: %s", strerror(errno));
		if (s >= 0)
			close(s);
		return -1;
	}
	close(s);
	/* Best effort (before Linux 4.11 there is no such setting): the sandbox works without it. */
	if (lstate_write_str("/proc/sys/net/ipv4/ip_unprivileged_port_start", "0") < 0)
		say("cannot open ports below 1024 to the sandbox's users: %s", strerror(errno));
	return 0;
}

/*
 * slirp4netns configures the sandbox's network as root of its user
 * namespace, which a sandbox of one uid (an unprivileged caller without
 * subordinate ids) does not have: network on is refused there, said, rather
 * than given as loopback alone. 0, or -1 with errno.
 */
int single_uid_network(const struct lmeta *m, int userns)
{
	if (!m->network || userns || geteuid() == 0)
		return 0;
	say("network on needs subordinate ids for uid %u (/etc/subuid and /etc/subgid, and HANGAR_LOCAL_SUBIDS on): "
	    "ask for network off or set HANGAR_LOCAL_NETWORK=off",
	    (unsigned)geteuid());
	errno = EOPNOTSUPP;
	return -1;
}

int net_prepare(struct jail *j)
{
	if (!j->meta.network)
		return 0;
	if (geteuid() != 0 && access("/dev/net/tun", R_OK | W_OK) < 0) {
		/*
		 * Refused, as the library refuses it before starting a jail: never
		 * loopback alone in place of what was asked for (nor the host's
		 * network).
		 */
		say("network on needs /dev/net/tun, which uid %u cannot open: sandbox %s not started",
		    (unsigned)geteuid(), j->id);
		return -1;
	}
	j->slirp_path = getenv("HANGAR_JAIL_SLIRP4NETNS");
	if (!j->slirp_path || !*j->slirp_path)
		j->slirp_path = "/usr/bin/slirp4netns";
	if (access(j->slirp_path, X_OK) < 0) {
		say("network on needs slirp4netns: %s: %s", j->slirp_path, strerror(errno));
		return -1;
	}
	if (pipe2(j->net_info, O_CLOEXEC) < 0) {
		say("pipe: %s", strerror(errno));
		return -1;
	}
	return 0;
}

int net_start(struct jail *j)
{
	/* With a user namespace of our own, the child makes the network namespace and says so (spawn_bwrap). */
	int from_child = j->spec.userns;

	if (j->net_info[1] < 0)
		return 0;
	close(j->net_info[1]);
	if (from_child) {
		/* bwrap was given no --info-fd (describe_sandbox). */
		close(j->net_info[0]);
		j->net_info[0] = -1;
	}
	/*
	 * bwrap goes on meanwhile and starts envd: the two start side by side.
	 * Nothing else runs in the sandbox before the library has both envd's
	 * "ready" and this "network" on the ready pipe (create.c), so no
	 * command ever sees the network before its routes are restricted.
	 */
	if (j->bwrap_pid > 0)
		j->slirp = net_setup(from_child ? j->ns_ready : j->net_info[0], from_child, j->bwrap_pid, j->slirp_path,
				     clock_mono_ms() + NET_DEADLINE_MS);
	/*
	 * Else net_info[0] stays open for the jail's life: bubblewrap writes
	 * its --info-fd in several writes, the last ones after the child's pid
	 * that net_setup waited for, and a closed pipe there would kill it
	 * with SIGPIPE. A few hundred bytes: the pipe holds them unread.
	 */
	if (j->bwrap_pid > 0 && j->slirp < 0)
		return -1;
	if (j->bwrap_pid > 0 && write(j->ready_fd, "network\n", 8) != 8) {
		say("cannot tell the library the network is up: %s", strerror(errno));
		return -1;
	}
	return 0;
}
