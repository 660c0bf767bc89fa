/*
 * hangar-envd-archive: hangar-envd's checkpoint worker (ckpt.h), run by the
 * daemon for one capture or restore and by nothing else. A program of its
 * own so that libarchive and the libraries it pulls in are loaded and
 * relocated here, in one short-lived process per request, not in every
 * sandbox's long-lived daemon.
 */
#include "ckpt.h"
#include "envd.h"

int main(int argc, char **argv)
{
	/* Before any name is looked up: no NSS module of an image's is ever loaded. */
	envd_runtime_lock_nss();
	return ckpt_worker_main(argc, argv);
}
