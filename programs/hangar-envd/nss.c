/*
 * The Name Service Switch locked to /etc files (envd.h, runtime.c's opening
 * comment says why). A file of its own: the checkpoint worker needs it too,
 * and nothing else of the daemon's runtime.
 */
#define _GNU_SOURCE
#include <nss.h>

#include "envd.h"

/* Every database glibc's Name Service Switch knows. */
static const char *const nss_databases[] = {
	"aliases", "ethers", "group", "gshadow", "hosts", "initgroups", "netgroup",
	"networks", "passwd", "protocols", "publickey", "rpc", "services", "shadow",
};

void envd_runtime_lock_nss(void)
{
	for (size_t i = 0; i < sizeof(nss_databases) / sizeof(nss_databases[0]); i++)
		__nss_configure_lookup(nss_databases[i], "files");
}
