/*
 * The sandbox's routes, set over rtnetlink from a child in its network
 * namespace. `ip -batch` did the same, but starting it (an exec and its
 * ten libraries) was most of a network-on create's last step, about 3 ms;
 * a fork and a few dozen netlink messages take a fraction of that.
 *
 * One request at a time, each acknowledged: the first refusal fails the
 * whole, and the jail tears the sandbox down rather than start it with
 * routes half restricted.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "jail.h"

/* A request: the header, the route, room for three attributes. */
struct rt_req {
	struct nlmsghdr h;
	struct rtmsg r;
	char attrs[64];
};

static void add_attr(struct rt_req *q, unsigned short type, const void *data, size_t len)
{
	struct rtattr *a = (struct rtattr *)((char *)q + NLMSG_ALIGN(q->h.nlmsg_len));

	a->rta_type = type;
	a->rta_len = (unsigned short)RTA_LENGTH(len);
	memcpy(RTA_DATA(a), data, len);
	q->h.nlmsg_len = NLMSG_ALIGN(q->h.nlmsg_len) + RTA_ALIGN(a->rta_len);
}

/* Sends one request and reads its acknowledgement. 0, or -1 with errno. */
static int transact(int fd, struct nlmsghdr *h, uint32_t seq)
{
	char buf[8192];

	h->nlmsg_seq = seq;
	h->nlmsg_flags |= NLM_F_REQUEST | NLM_F_ACK;
	if (send(fd, h, h->nlmsg_len, 0) != (ssize_t)h->nlmsg_len)
		return -1;
	for (;;) {
		ssize_t n = recv(fd, buf, sizeof(buf), 0);
		struct nlmsghdr *m;

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return errno = n == 0 ? EPIPE : errno, -1;
		for (m = (struct nlmsghdr *)buf; NLMSG_OK(m, (size_t)n); m = NLMSG_NEXT(m, n)) {
			const struct nlmsgerr *e = NLMSG_DATA(m);

			if (m->nlmsg_seq != seq || m->nlmsg_type != NLMSG_ERROR)
				continue;
			if (m->nlmsg_len < NLMSG_LENGTH(sizeof(*e)))
				return errno = EPROTO, -1;
			if (e->error)
				return errno = -e->error, -1;
			return 0;
		}
	}
}

/*
 * Deletes the main table's routes the kernel made for addresses (`ip route
 * flush proto kernel`): the on-link subnet would reach every address of
 * slirp4netns's network, not the gateway and the resolver alone.
 */
static int flush_kernel_routes(int fd, uint32_t *seq)
{
	struct rt_req q = { 0 };
	char buf[16384];
	struct rt_req *doomed = NULL;
	size_t n_doomed = 0;
	int done = 0, rc = 0;

	q.h.nlmsg_len = NLMSG_LENGTH(sizeof(q.r));
	q.h.nlmsg_type = RTM_GETROUTE;
	q.h.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
	q.h.nlmsg_seq = ++*seq;
	q.r.rtm_family = AF_INET;
	if (send(fd, &q, q.h.nlmsg_len, 0) != (ssize_t)q.h.nlmsg_len)
		return -1;
	while (!done) {
		ssize_t n = recv(fd, buf, sizeof(buf), 0);
		struct nlmsghdr *m;

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			rc = -1;
			break;
		}
		for (m = (struct nlmsghdr *)buf; NLMSG_OK(m, (size_t)n); m = NLMSG_NEXT(m, n)) {
			const struct rtmsg *r = NLMSG_DATA(m);
			struct rt_req *grown;

			if (m->nlmsg_seq != *seq)
				continue;
			if (m->nlmsg_type == NLMSG_ERROR) {
				/* A dump the kernel refused: the on-link routes would stay. */
				const struct nlmsgerr *e = NLMSG_DATA(m);

				errno = m->nlmsg_len >= NLMSG_LENGTH(sizeof(*e)) && e->error ? -e->error : EPROTO;
				rc = -1;
				done = 1;
				break;
			}
			if (m->nlmsg_type == NLMSG_DONE) {
				done = 1;
				break;
			}
			if (m->nlmsg_type != RTM_NEWROUTE || m->nlmsg_len < NLMSG_LENGTH(sizeof(*r)) ||
			    r->rtm_table != RT_TABLE_MAIN || r->rtm_protocol != RTPROT_KERNEL)
				continue;
			/* One to remove that a request cannot hold: failing beats leaving it. */
			if (m->nlmsg_len > sizeof(struct rt_req)) {
				errno = EMSGSIZE;
				rc = -1;
				done = 1;
				break;
			}
			grown = realloc(doomed, (n_doomed + 1) * sizeof(*doomed));
			if (!grown) {
				rc = -1;
				done = 1;
				break;
			}
			doomed = grown;
			memset(&doomed[n_doomed], 0, sizeof(*doomed));
			memcpy(&doomed[n_doomed], m, m->nlmsg_len);
			n_doomed++;
		}
	}
	for (size_t i = 0; rc == 0 && i < n_doomed; i++) {
		doomed[i].h.nlmsg_type = RTM_DELROUTE;
		doomed[i].h.nlmsg_flags = 0;
		rc = transact(fd, &doomed[i].h, ++*seq);
	}
	free(doomed);
	return rc;
}

static int add_route(int fd, uint32_t *seq, const struct net_route *rt, int ifindex)
{
	struct rt_req q = { 0 };
	uint32_t dst = rt->dst, oif = (uint32_t)ifindex;

	q.h.nlmsg_len = NLMSG_LENGTH(sizeof(q.r));
	q.h.nlmsg_type = RTM_NEWROUTE;
	q.h.nlmsg_flags = NLM_F_CREATE | (rt->replace ? NLM_F_REPLACE : NLM_F_EXCL);
	q.r.rtm_family = AF_INET;
	q.r.rtm_dst_len = (unsigned char)rt->prefix;
	q.r.rtm_table = RT_TABLE_MAIN;
	q.r.rtm_protocol = RTPROT_BOOT;
	q.r.rtm_type = rt->kind == NET_ROUTE_BLACKHOLE ? RTN_BLACKHOLE : RTN_UNICAST;
	/* As ip(8) chooses: on the link alone when there is no gateway. */
	q.r.rtm_scope = rt->kind == NET_ROUTE_LINK ? RT_SCOPE_LINK : RT_SCOPE_UNIVERSE;
	add_attr(&q, RTA_DST, &dst, sizeof(dst));
	if (rt->kind != NET_ROUTE_BLACKHOLE)
		add_attr(&q, RTA_OIF, &oif, sizeof(oif));
	if (rt->kind == NET_ROUTE_VIA)
		add_attr(&q, RTA_GATEWAY, &rt->gateway, sizeof(rt->gateway));
	return transact(fd, &q.h, ++*seq);
}

/* In the child, in the sandbox's namespace: the whole set. 0 or -1 said. */
static int apply(const struct net_route *routes, size_t n, const char *ifname)
{
	struct sockaddr_nl me = { .nl_family = AF_NETLINK };
	uint32_t seq = 0;
	int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
	int ifindex = (int)if_nametoindex(ifname);

	if (fd < 0 || bind(fd, (struct sockaddr *)&me, sizeof(me)) < 0) {
		say("routes: netlink: %s", strerror(errno));
		return -1;
	}
	if (ifindex <= 0) {
		say("routes: no interface %s in the sandbox: %s", ifname, strerror(errno));
		return -1;
	}
	if (flush_kernel_routes(fd, &seq) < 0) {
		say("routes: cannot remove the on-link routes: %s", strerror(errno));
		return -1;
	}
	for (size_t i = 0; i < n; i++) {
		if (add_route(fd, &seq, &routes[i], ifindex) < 0) {
			char a[INET_ADDRSTRLEN];

			inet_ntop(AF_INET, &routes[i].dst, a, sizeof(a));
			say("routes: cannot add the route to %s/%d: %s", a, routes[i].prefix, strerror(errno));
			return -1;
		}
	}
	close(fd);
	return 0;
}

int net_routes_apply(const struct net_route *routes, size_t n, const char *ifname, int userns, int netns)
{
	int status;
	pid_t pid = fork();

	if (pid == 0) {
		sigset_t none;

		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		if (net_enter(userns, netns) < 0) {
			say("routes: cannot enter the sandbox's network: %s", strerror(errno));
			_exit(126);
		}
		_exit(apply(routes, n, ifname) == 0 ? 0 : 1);
	}
	if (pid < 0)
		return -1;
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return -1;
	return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
}
