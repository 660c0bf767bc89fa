/* Exposing a sandbox's ports to the caller (provider table version 4). */
#define _GNU_SOURCE
#include <string.h>

#include "sandbox.h"

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
