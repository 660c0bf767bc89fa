/*
 * A sandbox's ports: exposed to the caller by the provider (provider table
 * version 4), or, on a platform that routes ports itself, where they answer
 * and with which credentials, as the provider described the sandbox.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sandbox.h"
#include "core/versioned.h"

/* What a provider may answer: "host:port" or a host name, printable, no spaces. */
static int plausible_address(const hangar_buf *b)
{
	if (!b->ptr || b->size == 0 || b->size > 255 || strlen(b->ptr) != b->size)
		return 0;
	for (size_t i = 0; i < b->size; i++)
		if (b->ptr[i] <= ' ' || b->ptr[i] >= 0x7f)
			return 0;
	return 1;
}

int hangar_sandbox_expose_port(hangar_buf *out_addr, hangar_sandbox *sb, uint32_t port)
{
	hangar_buf addr = HANGAR_BUF_INIT;
	struct hangar_provider *p;
	int rc;

	HCHECK_ARG(out_addr, "out_addr is NULL");
	HCHECK_ARG(sb, "sb is NULL");
	HCHECK_ARG(port >= 1 && port <= 65535, "port must be from 1 to 65535");
	p = sb->provider;
	if (!p->ops.expose_port)
		return herr(HANGAR_EUNSUPPORTED, HANGAR_ERRCAT_PROVIDER, "provider %s cannot expose ports",
			    p->ops.name);
	rc = PROVIDER_CALL(p, "expose_port", expose_port, sb->id, port, &addr);
	if (rc) {
		hangar_buf_dispose(&addr);
		return rc;
	}
	if (!plausible_address(&addr)) {
		hangar_buf_dispose(&addr);
		return herr(HANGAR_EPROTOCOL, HANGAR_ERRCAT_PROVIDER, "provider %s: an exposed port without an address",
			    p->ops.name);
	}
	hangar_buf_dispose(out_addr);
	*out_addr = addr;
	herr_clear();
	return 0;
}

/* ---- a port's endpoint, on a platform that routes ports itself ------------ */

/* Length of tmpl with every {port} replaced by port (decimal text). */
static size_t filled_len(const char *tmpl, const char *port)
{
	size_t n = 0;

	for (const char *p = tmpl; *p;) {
		if (!strncmp(p, "{port}", 6)) {
			n += strlen(port);
			p += 6;
		} else {
			n++;
			p++;
		}
	}
	return n;
}

/* Writes tmpl filled as filled_len() counts, and its NUL, at dst; returns past the NUL. */
static char *fill_into(char *dst, const char *tmpl, const char *port)
{
	for (const char *p = tmpl; *p;) {
		if (!strncmp(p, "{port}", 6)) {
			dst = stpcpy(dst, port);
			p += 6;
		} else {
			*dst++ = *p++;
		}
	}
	*dst++ = '\0';
	return dst;
}

/*
 * One block for the caller to free: the headers' pointer array first (so it
 * is aligned), then the URL and each line, {port} filled.
 */
static int build_port_endpoint(hangar_port_endpoint *full, const struct hangar_sys_sandbox *d, uint32_t port)
{
	size_t nh = d->nport_headers, size = (nh + 1) * sizeof(char *);
	char portstr[16], *block, *s;
	const char **lines;

	snprintf(portstr, sizeof(portstr), "%u", (unsigned)port);
	size += filled_len(d->port_url, portstr) + 1;
	for (size_t i = 0; i < nh; i++)
		size += filled_len(d->port_headers[i], portstr) + 1;
	block = malloc(size);
	if (!block)
		return herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
	lines = (const char **)(void *)block;
	s = block + (nh + 1) * sizeof(char *);
	full->url = s;
	s = fill_into(s, d->port_url, portstr);
	for (size_t i = 0; i < nh; i++) {
		lines[i] = s;
		s = fill_into(s, d->port_headers[i], portstr);
	}
	lines[nh] = NULL;
	full->headers = lines;
	full->storage.ptr = block;
	full->storage.size = size - 1;
	return 0;
}

int hangar_sandbox_port_endpoint(hangar_port_endpoint *out, hangar_sandbox *sb, uint32_t port)
{
	hangar_port_endpoint full = HANGAR_PORT_ENDPOINT_INIT;
	struct sbview *v;
	int rc;

	HCHECK_ARG(out, "out is NULL");
	if ((rc = hversioned_check(out, &hv_port_endpoint, "out")) != 0)
		return rc;
	/* Storage must reach the caller, or what it holds would leak. */
	HCHECK_ARG(out->size >= sizeof(hangar_port_endpoint), "out->size does not cover storage");
	HCHECK_ARG(sb, "sb is NULL");
	HCHECK_ARG(port >= 1 && port <= 65535, "port must be from 1 to 65535");
	v = sandbox_current_view(sb);
	if (!v->desc.port_url)
		rc = herr(HANGAR_EUNSUPPORTED, HANGAR_ERRCAT_PROVIDER,
			  "provider %s routes no ports itself: its ports are exposed by hangar_sandbox_expose_port()",
			  sb->provider->ops.name);
	else if (v->desc.state == HANGAR_SANDBOX_PAUSED)
		rc = herr(HANGAR_EPAUSED, HANGAR_ERRCAT_ARGUMENT, "sandbox %s is paused", sb->id);
	else
		rc = build_port_endpoint(&full, &v->desc, port);
	sbview_put(v);
	if (rc)
		return rc;
	hangar_buf_dispose(&out->storage);
	hresult_store(out, &full, sizeof(full));
	herr_clear();
	return 0;
}
