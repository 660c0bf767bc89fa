/*
 * libcurl, loaded the first time net/ calls it (util/dl.h says why): each
 * function net.c uses, defined here under curl's own name, loads the
 * library and forwards. A function that cannot reach libcurl answers as
 * curl does for a handle it cannot make (NULL, CURLE_FAILED_INIT);
 * net_global_init() calls curl_loaded() first, so that a missing library is
 * reported as one, by name.
 */
#define CURL_DISABLE_TYPECHECK /* here the calls are forwarded, not made: their types are checked in net.c */
#include <curl/curl.h>
#include <stdarg.h>
#include <stddef.h>

#include "net.h"
#include "util/dl.h"

/* curl.h makes these macros that check the argument count; defined here as functions. */
#undef curl_easy_setopt
#undef curl_easy_getinfo
#undef curl_share_setopt

#define CURL_FUNCTIONS(X)                                                                                      \
	X(curl_global_init) X(curl_easy_init) X(curl_easy_cleanup) X(curl_easy_reset) X(curl_easy_setopt)     \
	X(curl_easy_getinfo) X(curl_easy_perform) X(curl_easy_strerror) X(curl_easy_escape) X(curl_free)     \
	X(curl_getdate) X(curl_share_init) X(curl_share_cleanup) X(curl_share_setopt) X(curl_slist_append)   \
	X(curl_slist_free_all)

DL_LIBRARY(curl_lib, "libcurl.so.4", CURL_FUNCTIONS);

int curl_loaded(const char **why)
{
	if (dl_load(&curl_lib) == 0)
		return 1;
	*why = dl_why(&curl_lib);
	return 0;
}

#define LOADED() (dl_load(&curl_lib) == 0)

CURLcode curl_global_init(long flags)
{
	return LOADED() ? fn.curl_global_init(flags) : CURLE_FAILED_INIT;
}

CURL *curl_easy_init(void)
{
	return LOADED() ? fn.curl_easy_init() : NULL;
}

/* The calls below take what only a loaded libcurl made: it is loaded. */
void curl_easy_cleanup(CURL *h)
{
	if (LOADED())
		fn.curl_easy_cleanup(h);
}

void curl_easy_reset(CURL *h)
{
	if (LOADED())
		fn.curl_easy_reset(h);
}

/* The option's number says the type of its one argument, as in curl itself (CURLOPTTYPE_*). */
CURLcode curl_easy_setopt(CURL *h, CURLoption option, ...)
{
	CURLcode rc = CURLE_FAILED_INIT;
	va_list ap;

	va_start(ap, option);
	if (!LOADED())
		;
	else if (option < CURLOPTTYPE_OBJECTPOINT)
		rc = fn.curl_easy_setopt(h, option, va_arg(ap, long));
	else if (option < CURLOPTTYPE_FUNCTIONPOINT)
		rc = fn.curl_easy_setopt(h, option, va_arg(ap, void *));
	else if (option < CURLOPTTYPE_OFF_T)
		rc = fn.curl_easy_setopt(h, option, va_arg(ap, void (*)(void)));
	else if (option < CURLOPTTYPE_BLOB)
		rc = fn.curl_easy_setopt(h, option, va_arg(ap, curl_off_t));
	else
		rc = fn.curl_easy_setopt(h, option, va_arg(ap, void *));
	va_end(ap);
	return rc;
}

/* Every CURLINFO_* takes a pointer to where the answer goes. */
CURLcode curl_easy_getinfo(CURL *h, CURLINFO info, ...)
{
	CURLcode rc = CURLE_FAILED_INIT;
	va_list ap;

	va_start(ap, info);
	if (LOADED())
		rc = fn.curl_easy_getinfo(h, info, va_arg(ap, void *));
	va_end(ap);
	return rc;
}

CURLcode curl_easy_perform(CURL *h)
{
	return LOADED() ? fn.curl_easy_perform(h) : CURLE_FAILED_INIT;
}

const char *curl_easy_strerror(CURLcode code)
{
	return LOADED() ? fn.curl_easy_strerror(code) : dl_why(&curl_lib);
}

char *curl_easy_escape(CURL *h, const char *s, int length)
{
	return LOADED() ? fn.curl_easy_escape(h, s, length) : NULL;
}

void curl_free(void *p)
{
	if (p && LOADED())
		fn.curl_free(p);
}

time_t curl_getdate(const char *date, const time_t *unused)
{
	return LOADED() ? fn.curl_getdate(date, unused) : -1;
}

CURLSH *curl_share_init(void)
{
	return LOADED() ? fn.curl_share_init() : NULL;
}

CURLSHcode curl_share_cleanup(CURLSH *s)
{
	return LOADED() ? fn.curl_share_cleanup(s) : CURLSHE_NOT_BUILT_IN;
}

/* SHARE and UNSHARE take a curl_lock_data (an int), the lock functions a function, USERDATA a pointer. */
CURLSHcode curl_share_setopt(CURLSH *s, CURLSHoption option, ...)
{
	CURLSHcode rc = CURLSHE_NOT_BUILT_IN;
	va_list ap;

	va_start(ap, option);
	if (!LOADED())
		;
	else if (option == CURLSHOPT_SHARE || option == CURLSHOPT_UNSHARE)
		rc = fn.curl_share_setopt(s, option, va_arg(ap, int));
	else if (option == CURLSHOPT_LOCKFUNC || option == CURLSHOPT_UNLOCKFUNC)
		rc = fn.curl_share_setopt(s, option, va_arg(ap, void (*)(void)));
	else
		rc = fn.curl_share_setopt(s, option, va_arg(ap, void *));
	va_end(ap);
	return rc;
}

struct curl_slist *curl_slist_append(struct curl_slist *list, const char *s)
{
	return LOADED() ? fn.curl_slist_append(list, s) : NULL;
}

void curl_slist_free_all(struct curl_slist *list)
{
	if (list && LOADED())
		fn.curl_slist_free_all(list);
}
