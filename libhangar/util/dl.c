/* Libraries loaded when first used: see dl.h. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "dl.h"

/*
 * The libraries whose load() is running, by thread: pthread_once gives no
 * argument to its routine, so the one in progress is handed over here.
 */
static __thread struct dl_lib *loading;

static void load(void)
{
	struct dl_lib *lib = loading;
	/* RTLD_LOCAL: its symbols stay out of the global scope, where they would interpose nothing. */
	void *h = dlopen(lib->soname, RTLD_NOW | RTLD_LOCAL);

	if (!h) {
		const char *e = dlerror();

		snprintf(lib->why, sizeof(lib->why), "cannot load %s: %s", lib->soname, e ? e : "not found");
		return;
	}
	for (size_t i = 0; i < lib->n; i++) {
		void *p = dlsym(h, lib->names[i]);

		if (!p) {
			snprintf(lib->why, sizeof(lib->why), "cannot load %s: it has no %s (too old?)", lib->soname,
				 lib->names[i]);
			/* Kept loaded: unloading a library that may have started threads is not safe. */
			return;
		}
		/* A function pointer object, written as the bytes of the address (POSIX: the same size). */
		memcpy(lib->slots[i], &p, sizeof(p));
	}
	__atomic_store_n(&lib->loaded, 1, __ATOMIC_RELEASE);
}

int dl_load(struct dl_lib *lib)
{
	if (__atomic_load_n(&lib->loaded, __ATOMIC_ACQUIRE))
		return 0;
	loading = lib;
	pthread_once(&lib->once, load);
	loading = NULL;
	return __atomic_load_n(&lib->loaded, __ATOMIC_ACQUIRE) ? 0 : -1;
}

const char *dl_why(const struct dl_lib *lib)
{
	return lib->why[0] ? lib->why : "not loaded";
}
