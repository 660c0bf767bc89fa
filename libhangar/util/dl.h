/*
 * Libraries loaded when first used. libcurl, libpq and libarchive bring
 * some forty shared objects between them (TLS, Kerberos, LDAP, ICU, ...);
 * linked, every process that loads libhangar would map and relocate them
 * all before main(), some 7 ms of CPU for each run of hangar(1), though a
 * local sandbox needs none of them. So libhangar does not link them: the
 * layer that uses one (net/ libcurl, store/ libpq, image/ libarchive)
 * defines each function it calls under the library's own name, in a file of
 * its own (net/curl-dl.c, store/pq-dl.c, image/archive-dl.c), and that
 * definition loads the library on its first call and forwards. The callers
 * are written against the libraries' headers as usual, with the compiler's
 * checks of every call.
 *
 * The definitions are hidden (libhangar is built -fvisibility=hidden and
 * exports hangar_* alone), so a program that links one of these libraries
 * itself keeps calling its own copy; dlopen() then finds the same library
 * already loaded.
 */
#pragma once

#include <pthread.h>
#include <stddef.h>

/*
 * One library: its soname, the functions wanted, where their addresses go
 * (each a function pointer object, in the same order), and what loading
 * found. Static, zero-initialised but for the first four fields and once.
 */
struct dl_lib {
	const char *soname;          /* "libcurl.so.4": the ABI the headers describe */
	const char *const *names;    /* the functions, n of them */
	void *const *slots;          /* &pointer for each, as void * */
	size_t n;
	pthread_once_t once;         /* PTHREAD_ONCE_INIT */
	int loaded;                  /* 1 once every function was found */
	char why[256];               /* when not: what went wrong */
};

/*
 * Loads lib once per process, whichever thread asks first, and fills its
 * slots. Returns 0, or -1 when the library or one of its functions cannot
 * be found (then dl_why() says which, and every later call returns -1 at
 * once: a process does not retry). Thread-safe.
 */
int dl_load(struct dl_lib *lib);

/* Why dl_load() failed, naming the library: a string owned by lib. */
const char *dl_why(const struct dl_lib *lib);

/*
 * For the file that forwards a library's functions: LIST(X) names them,
 * X(function) each. Defines `fn`, a pointer of each function's own type
 * under its name (fn.curl_easy_init), and `lib`, the struct dl_lib that
 * fills them from the library whose soname is so.
 */
#define DL_FIELD_(f) __typeof__(f) *f;
#define DL_NAME_(f) #f,
#define DL_SLOT_(f) &fn.f,
#define DL_LIBRARY(lib, so, LIST)                                                                              \
	static struct {                                                                                        \
		LIST(DL_FIELD_)                                                                                \
	} fn;                                                                                                  \
	static const char *const lib##_names[] = { LIST(DL_NAME_) };                                         \
	static void *const lib##_slots[] = { LIST(DL_SLOT_) };                                               \
	static struct dl_lib lib = { .soname = so,                                                           \
				     .names = lib##_names,                                                    \
				     .slots = lib##_slots,                                                    \
				     .n = sizeof(lib##_names) / sizeof(lib##_names[0]),                       \
				     .once = PTHREAD_ONCE_INIT }
