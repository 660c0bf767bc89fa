/*
 * The generated layer of the Python bindings: hangar._hangar.
 *
 * It is private. The package's Python modules (hangar/*.py) are the API; they
 * call the functions below and nothing else reaches Python users.
 *
 * Three rules hold for everything here:
 *   - the GIL is released around every call into libhangar that can block:
 *     `-threads` does it for the functions wrapped straight from the headers,
 *     and the py_* helpers (marked %nothread) do it themselves, since they
 *     build Python objects around the call;
 *   - a callback into Python takes the GIL (PyGILState_Ensure); the first
 *     exception it raises is kept, the C call is told to stop where it can,
 *     and the exception is raised to the caller once the call returns;
 *   - a negative code becomes an exception right after the call, on the same
 *     thread, from hangar_error_last(); which class it is, is decided in one
 *     place (hangar/errors.py, through set_error_factory()).
 */
%module(package="hangar") _hangar

%{
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdlib.h>
#include <string.h>
#include <hangar/hangar.h>
%}

/* ---- errors ------------------------------------------------------------------------ */

%{
static PyObject *error_factory;

static int dput(PyObject *d, const char *key, PyObject *v)
{
	int rc;

	if (!v)
		return -1;
	rc = PyDict_SetItemString(d, key, v);
	Py_DECREF(v);
	return rc;
}

/* Text from the library, or None: invalid UTF-8 survives as surrogates. */
static PyObject *pstr(const char *s)
{
	if (!s)
		Py_RETURN_NONE;
	return PyUnicode_DecodeUTF8(s, (Py_ssize_t)strlen(s), "surrogateescape");
}

/* A NULL-terminated array of strings as a list, or NULL with an exception set. */
static PyObject *pstr_list(const char *const *v)
{
	PyObject *list = PyList_New(0);

	for (const char *const *p = v; list && *p; p++) {
		PyObject *one = pstr(*p);

		if (!one || PyList_Append(list, one) < 0) {
			Py_XDECREF(one);
			Py_CLEAR(list);
			break;
		}
		Py_DECREF(one);
	}
	return list;
}

#define PUT_S(d, st, f) dput((d), #f, pstr((st)->f))
#define PUT_I(d, st, f) dput((d), #f, PyLong_FromLongLong((long long)(st)->f))
#define PUT_U(d, st, f) dput((d), #f, PyLong_FromUnsignedLongLong((unsigned long long)(st)->f))

/* Sets the Python exception for code from the error e (another thread's, copied); GIL held. */
static void raise_error(int code, const hangar_error *e)
{
	PyObject *d = PyDict_New(), *exc;

	if (!d)
		return;
	if (dput(d, "code", PyLong_FromLong(code)) || dput(d, "name", pstr(hangar_error_name(code))) ||
	    dput(d, "message", pstr(e->code == code ? e->message : hangar_strerror(code))) ||
	    dput(d, "category", PyLong_FromLong(e->code == code ? e->category : 0)) ||
	    dput(d, "os_errno", PyLong_FromLong(e->code == code ? e->os_errno : 0)) ||
	    dput(d, "http_status", PyLong_FromLong(e->code == code ? e->http_status : 0)) ||
	    dput(d, "provider_code", pstr(e->code == code ? e->provider_code : "")) ||
	    dput(d, "retry_after", PyLong_FromLong(e->code == code ? e->retry_after_s : 0)) ||
	    dput(d, "flags", PyLong_FromUnsignedLong(e->code == code ? e->flags : 0))) {
		Py_DECREF(d);
		return;
	}
	if (!error_factory) {
		PyErr_Format(PyExc_RuntimeError, "hangar error %d: %U", code, PyDict_GetItemString(d, "message"));
		Py_DECREF(d);
		return;
	}
	exc = PyObject_CallOneArg(error_factory, d);
	Py_DECREF(d);
	if (exc) {
		PyErr_SetObject((PyObject *)Py_TYPE(exc), exc);
		Py_DECREF(exc);
	}
}

/* Sets the Python exception for code from this thread's last error; GIL held. */
static void raise_last(int code)
{
	raise_error(code, hangar_error_last());
}
%}

/* Every int a public function returns is 0 or more, or a negative code. */
%typemap(out) int {
	if ($1 < 0) {
		raise_last($1);
		SWIG_fail;
	}
	$result = PyLong_FromLong($1);
}

/* ---- outputs ------------------------------------------------------------------------- */

%define HANDLE_OUT(TYPE)
%typemap(in, numinputs=0) TYPE **out (TYPE *tmp = NULL) { $1 = &tmp; }
%typemap(argout) TYPE **out {
	$result = SWIG_Python_AppendOutput($result, SWIG_NewPointerObj(tmp$argnum, $descriptor(TYPE *), 0));
}
%enddef
HANDLE_OUT(hangar_ctx)
HANDLE_OUT(hangar_provider)
HANDLE_OUT(hangar_sandbox)
HANDLE_OUT(hangar_process)
HANDLE_OUT(hangar_session)
HANDLE_OUT(hangar_checkpoint)

/* Buffers the library fills come back as bytes and are freed at once. */
%typemap(in, numinputs=0) hangar_buf *OUTBUF (hangar_buf tmp = HANGAR_BUF_INIT) { $1 = &tmp; }
%typemap(argout) hangar_buf *OUTBUF {
	$result = SWIG_Python_AppendOutput($result,
		PyBytes_FromStringAndSize(tmp$argnum.ptr ? tmp$argnum.ptr : "", (Py_ssize_t)tmp$argnum.size));
}
%typemap(freearg) hangar_buf *OUTBUF { hangar_buf_dispose(&tmp$argnum); }
%apply hangar_buf *OUTBUF { hangar_buf *out, hangar_buf *out_id, hangar_buf *out_addr, hangar_buf *out_template_id };

%typemap(in, numinputs=0) uint32_t *OUTU32 (uint32_t tmp = 0) { $1 = &tmp; }
%typemap(argout) uint32_t *OUTU32 { $result = SWIG_Python_AppendOutput($result, PyLong_FromUnsignedLong(tmp$argnum)); }
%apply uint32_t *OUTU32 { uint32_t *reaped, uint32_t *archived };

%typemap(in, numinputs=0) int *released (int tmp = 0) { $1 = &tmp; }
%typemap(argout) int *released { $result = SWIG_Python_AppendOutput($result, PyBool_FromLong(tmp$argnum)); }

%typemap(in, numinputs=0) int32_t *exit_code (int32_t tmp = 0) { $1 = &tmp; }
%typemap(argout) int32_t *exit_code { $result = SWIG_Python_AppendOutput($result, PyLong_FromLong(tmp$argnum)); }

/* ---- inputs -------------------------------------------------------------------------- */

/* Bytes-like input, held (so not resized) for the call. */
%typemap(in) (const void *data, size_t len) (Py_buffer view = { 0 }) {
	if (PyObject_GetBuffer($input, &view, PyBUF_SIMPLE) != 0)
		SWIG_fail;
	$1 = view.buf;
	$2 = (size_t)view.len;
}
%typemap(freearg) (const void *data, size_t len) {
	if (view$argnum.obj)
		PyBuffer_Release(&view$argnum);
}
%typemap(typecheck) (const void *data, size_t len) { $1 = PyObject_CheckBuffer($input); }

/* A sequence of str (or None) as a NULL-terminated array, copied for the call. */
%{
static void strv_free(char **v)
{
	if (v) {
		for (char **p = v; *p; p++)
			free(*p);
		free(v);
	}
}

static int strv_from(PyObject *o, char ***out)
{
	PyObject *seq;
	Py_ssize_t n;

	*out = NULL;
	if (o == Py_None)
		return 0;
	if (PyUnicode_Check(o) || PyBytes_Check(o)) {
		PyErr_SetString(PyExc_TypeError, "expected a sequence of str, not a single string");
		return -1;
	}
	seq = PySequence_Fast(o, "expected a sequence of str");
	if (!seq)
		return -1;
	n = PySequence_Fast_GET_SIZE(seq);
	*out = calloc((size_t)n + 1, sizeof(char *));
	if (!*out) {
		Py_DECREF(seq);
		PyErr_NoMemory();
		return -1;
	}
	for (Py_ssize_t i = 0; i < n; i++) {
		const char *s = PyUnicode_Check(PySequence_Fast_GET_ITEM(seq, i)) ?
			PyUnicode_AsUTF8(PySequence_Fast_GET_ITEM(seq, i)) : NULL;

		if (!s) {
			if (!PyErr_Occurred())
				PyErr_SetString(PyExc_TypeError, "expected a sequence of str");
			goto fail;
		}
		if (!((*out)[i] = strdup(s))) {
			PyErr_NoMemory();
			goto fail;
		}
	}
	Py_DECREF(seq);
	return 0;
fail:
	Py_DECREF(seq);
	strv_free(*out);
	*out = NULL;
	return -1;
}
%}
%typemap(in) char **STRV (char **tmp = NULL) {
	if (strv_from($input, &tmp) < 0)
		SWIG_fail;
	$1 = tmp;
}
%typemap(freearg) char **STRV { strv_free(tmp$argnum); }
%apply char **STRV { char **env, char **labels };

/* Python callables pass through as they are. */
%typemap(in) PyObject *fn "$1 = $input;"

/* ---- the public headers --------------------------------------------------------------- */

/* Functions that take C callbacks, option structs or buffers to dispose are
 * reached through the py_* helpers below instead. */
%ignore hangar_buf_dispose;
%ignore hangar_exec_result_dispose;
%ignore hangar_ctx_foreach_setting;
%ignore hangar_ctx_foreach_setting_of;
%ignore hangar_ctx_set_log;
%ignore hangar_ctx_set_event;
%ignore hangar_provider_register;
%ignore hangar_provider_foreach;
%ignore hangar_sandbox_create;
%ignore hangar_sandbox_get_info;
%ignore hangar_sandbox_envd_endpoint;
%ignore hangar_envd_endpoint;
%ignore hangar_sandbox_port_endpoint;
%ignore hangar_port_endpoint;
%ignore hangar_sandbox_list;
%ignore hangar_sandbox_exec;
%ignore hangar_sandbox_copy_out;
%ignore hangar_sandbox_list_files;
%ignore hangar_sandbox_stat;
%ignore hangar_sandbox_fork;
%ignore hangar_sandbox_metrics;
%ignore hangar_sandbox_logs;
%ignore hangar_process_start;
%ignore hangar_process_attach;
%ignore hangar_template_build;
%ignore hangar_template_list;
%ignore hangar_snapshot_list;
%ignore hangar_tier_foreach;
%ignore hangar_image_import;
%ignore hangar_image_pull;
%ignore hangar_image_list;
%ignore hangar_image_inspect;
%ignore hangar_image_gc;
%ignore hangar_environment_list;
%ignore hangar_environment_get;
%ignore hangar_checkpoint_create;
%ignore hangar_checkpoint_get_info;
%ignore hangar_checkpoint_list;
%ignore hangar_checkpoint_restore;
%ignore hangar_checkpoint_export;
%ignore hangar_session_create;
%ignore hangar_session_suspend;
%ignore hangar_session_get_info;
%ignore hangar_session_list;
%ignore hangar_session_set_hook;
%ignore hangar_session_fork;
%ignore hangar_session_fork_ext;
%ignore hangar_error_last;
%ignore hangar_ctx_reap;
%ignore hangar_create_opts_init;
%ignore hangar_exec_opts_init;
%ignore hangar_copy_opts_init;
%ignore hangar_process_opts_init;
%ignore hangar_template_build_opts_init;
%ignore hangar_checkpoint_opts_init;
%ignore hangar_restore_opts_init;
%ignore hangar_session_opts_init;
%ignore hangar_suspend_opts_init;
%ignore hangar_session_fork_opts_init;
%ignore hangar_publish_opts_init;
%ignore hangar_image_opts_init;
/* The structs are read by the helpers in C; Python never sees them. */
%ignore hangar_buf;
%ignore hangar_error;
%ignore hangar_create_opts;
%ignore hangar_sandbox_info;
%ignore hangar_exec_opts;
%ignore hangar_exec_result;
%ignore hangar_copy_opts;
%ignore hangar_file_info;
%ignore hangar_fork_result;
%ignore hangar_sandbox_metric;
%ignore hangar_sandbox_log_entry;
%ignore hangar_process_opts;
%ignore hangar_template_build_opts;
%ignore hangar_template_info;
%ignore hangar_snapshot_info;
%ignore hangar_tier_info;
%ignore hangar_environment_info;
%ignore hangar_publish_result;
%ignore hangar_publish_opts;
%ignore hangar_environment_publish;
%ignore hangar_checkpoint_opts;
%ignore hangar_checkpoint_info;
%ignore hangar_restore_opts;
%ignore hangar_session_opts;
%ignore hangar_suspend_opts;
%ignore hangar_session_fork_opts;
%ignore hangar_session_info;
%ignore hangar_session_fork_result;
%ignore hangar_reap_result;
%ignore hangar_image_opts;
%ignore hangar_image_info;
%ignore hangar_image_progress;

%include <stdint.i>
%include "hangar/common.h"
%include "version.h"
%include "hangar/types.h"
%include "hangar/errors.h"
%include "hangar/buffer.h"
%include "hangar/context.h"
%include "hangar/provider.h"
%include "hangar/sandbox.h"
%include "hangar/process.h"
%include "hangar/template.h"
%include "hangar/tier.h"
%include "hangar/environment.h"
%include "hangar/checkpoint.h"
%include "hangar/session.h"
%include "hangar/image.h"

/* ---- callbacks ------------------------------------------------------------------------ */

%{
/* One Python callable and the first exception it raised. Touched only with the GIL. */
struct pycb {
	PyObject *fn;
	PyObject *et, *ev, *tb;
	int failed;          /* read without the GIL by cancel polls */
	PyObject *cancel;    /* exec's: asked whether to give up, or NULL */
};

/* Calls cb->fn(arg), stealing arg; GIL held. Returns fn's int result, or 1
 * (stop) once an exception was raised: it is kept for the caller. */
static int cb_call(struct pycb *cb, PyObject *arg)
{
	PyObject *r;
	int ret = 0;

	if (cb->failed) {
		Py_XDECREF(arg);
		return 1;
	}
	r = arg ? PyObject_CallOneArg(cb->fn, arg) : NULL;
	Py_XDECREF(arg);
	if (r) {
		if (PyLong_Check(r))
			ret = (int)PyLong_AsLong(r);
		else if (r != Py_None)
			ret = PyObject_IsTrue(r);
		Py_DECREF(r);
		if (!PyErr_Occurred())
			return ret;
	}
	PyErr_Fetch(&cb->et, &cb->ev, &cb->tb);
	__atomic_store_n(&cb->failed, 1, __ATOMIC_RELEASE);
	return 1;
}

/* After the C call: raise what a callback raised, else the call's error. GIL held. */
static PyObject *cb_finish(struct pycb *cb, int rc)
{
	if (cb && cb->failed) {
		PyErr_Restore(cb->et, cb->ev, cb->tb);
		cb->et = cb->ev = cb->tb = NULL;
		cb->failed = 0;
		return NULL;
	}
	if (rc < 0) {
		raise_last(rc);
		return NULL;
	}
	return PyLong_FromLong(rc);
}

#define TRAMPOLINE(name, ctype, convert)                                  \
	static int name(ctype v, void *payload)                           \
	{                                                                  \
		PyGILState_STATE g = PyGILState_Ensure();                  \
		int r = cb_call(payload, convert(v));                      \
		PyGILState_Release(g);                                     \
		return r;                                                  \
	}

#define BLOCKING(stmt)                 \
	do {                           \
		Py_BEGIN_ALLOW_THREADS \
		stmt;                  \
		Py_END_ALLOW_THREADS   \
	} while (0)

#define CB_INIT(fn_) { (fn_), NULL, NULL, NULL, 0, NULL }

static PyObject *d_sandbox_info(const hangar_sandbox_info *i)
{
	PyObject *d = PyDict_New();

	if (d && (PUT_S(d, i, id) || PUT_S(d, i, provider) || PUT_S(d, i, template_id) || PUT_I(d, i, state) ||
		  PUT_I(d, i, created_at_us) || PUT_I(d, i, expires_at_us)))
		Py_CLEAR(d);
	return d;
}
TRAMPOLINE(tr_sandbox_info, const hangar_sandbox_info *, d_sandbox_info)

static PyObject *d_file_info(const hangar_file_info *i)
{
	PyObject *d = PyDict_New();

	if (d && (PUT_S(d, i, name) || PUT_S(d, i, path) || PUT_I(d, i, type) || PUT_U(d, i, mode) ||
		  PUT_U(d, i, bytes) || PUT_I(d, i, mtime_us) || PUT_S(d, i, owner) || PUT_S(d, i, group) ||
		  PUT_S(d, i, permissions) || PUT_S(d, i, symlink_target)))
		Py_CLEAR(d);
	return d;
}
TRAMPOLINE(tr_file_info, const hangar_file_info *, d_file_info)

static PyObject *d_metric(const hangar_sandbox_metric *m)
{
	PyObject *d = PyDict_New();
	int v2 = m->size >= offsetof(hangar_sandbox_metric, pids_max) + sizeof(m->pids_max);

	if (d && (PUT_I(d, m, timestamp_us) || PUT_U(d, m, cpu_count) ||
		  dput(d, "cpu_used_pct", PyFloat_FromDouble(m->cpu_used_pct)) || PUT_U(d, m, mem_used_bytes) ||
		  PUT_U(d, m, mem_total_bytes) || PUT_U(d, m, disk_used_bytes) || PUT_U(d, m, disk_total_bytes) ||
		  dput(d, "pids_used", PyLong_FromUnsignedLong(v2 ? m->pids_used : 0)) ||
		  dput(d, "pids_max", PyLong_FromUnsignedLong(v2 ? m->pids_max : 0))))
		Py_CLEAR(d);
	return d;
}
TRAMPOLINE(tr_metric, const hangar_sandbox_metric *, d_metric)

static PyObject *d_log_entry(const hangar_sandbox_log_entry *e)
{
	PyObject *d = PyDict_New();

	if (d && (PUT_I(d, e, timestamp_us) || PUT_S(d, e, level) || PUT_S(d, e, message)))
		Py_CLEAR(d);
	return d;
}
TRAMPOLINE(tr_log_entry, const hangar_sandbox_log_entry *, d_log_entry)

/* Handles reach Python borrowed: the Python side takes its own reference. */
static PyObject *d_fork(const hangar_fork_result *r)
{
	PyObject *d = PyDict_New();

	if (d && (PUT_U(d, r, index) || PUT_I(d, r, error) || PUT_S(d, r, message) ||
		  dput(d, "sandbox", SWIG_NewPointerObj(r->sandbox, SWIGTYPE_p_hangar_sandbox, 0))))
		Py_CLEAR(d);
	return d;
}

static void tr_fork(const hangar_fork_result *r, void *payload)
{
	PyGILState_STATE g = PyGILState_Ensure();

	cb_call(payload, d_fork(r));
	PyGILState_Release(g);
}

static PyObject *d_session_fork(const hangar_session_fork_result *r)
{
	PyObject *d = PyDict_New();

	if (d && (PUT_U(d, r, index) || PUT_I(d, r, error) || PUT_I(d, r, method) || PUT_S(d, r, message) ||
		  dput(d, "session", SWIG_NewPointerObj(r->session, SWIGTYPE_p_hangar_session, 0))))
		Py_CLEAR(d);
	return d;
}

static void tr_session_fork(const hangar_session_fork_result *r, void *payload)
{
	PyGILState_STATE g = PyGILState_Ensure();

	cb_call(payload, d_session_fork(r));
	PyGILState_Release(g);
}

static PyObject *d_checkpoint(hangar_checkpoint *cp)
{
	return SWIG_NewPointerObj(cp, SWIGTYPE_p_hangar_checkpoint, 0);
}
TRAMPOLINE(tr_checkpoint, hangar_checkpoint *, d_checkpoint)

static PyObject *d_provider(hangar_provider *p)
{
	return SWIG_NewPointerObj(p, SWIGTYPE_p_hangar_provider, 0);
}
TRAMPOLINE(tr_provider, hangar_provider *, d_provider)

static PyObject *d_checkpoint_info(const hangar_checkpoint_info *i)
{
	PyObject *d = PyDict_New();

	if (d && (PUT_S(d, i, id) || PUT_S(d, i, session_id) || PUT_S(d, i, parent_id) || PUT_S(d, i, workspace) ||
		  PUT_S(d, i, selection) || PUT_S(d, i, store_url) || PUT_S(d, i, content_hash) ||
		  PUT_S(d, i, labels_json) || PUT_I(d, i, created_at_us) || PUT_U(d, i, stored_bytes) ||
		  PUT_U(d, i, archive_bytes) || PUT_U(d, i, files) || PUT_U(d, i, blob_bytes)))
		Py_CLEAR(d);
	return d;
}

static PyObject *d_session_info(const hangar_session_info *i)
{
	PyObject *d = PyDict_New();

	if (d && (PUT_S(d, i, id) || PUT_I(d, i, state) || PUT_I(d, i, last_resume) ||
		  PUT_S(d, i, last_resume_reason) || PUT_S(d, i, suspend_reason) || PUT_S(d, i, environment) ||
		  PUT_S(d, i, workspace) || PUT_S(d, i, provider) || PUT_S(d, i, sandbox_id) ||
		  PUT_S(d, i, checkpoint_id) || PUT_S(d, i, parent_id) || PUT_S(d, i, fork_group) ||
		  PUT_S(d, i, labels_json) || PUT_U(d, i, flags) || PUT_I(d, i, created_at_us) ||
		  PUT_I(d, i, updated_at_us) || PUT_I(d, i, parked_since_us)))
		Py_CLEAR(d);
	return d;
}
TRAMPOLINE(tr_session_info, const hangar_session_info *, d_session_info)

static PyObject *d_tier(const hangar_tier_info *t)
{
	PyObject *d = PyDict_New(), *names = PyList_New(t->n_providers), *cool = PyList_New(t->n_providers),
		 *loaded = PyList_New(t->n_providers);

	if (!d || !names || !cool || !loaded)
		goto fail;
	for (uint32_t i = 0; i < t->n_providers; i++) {
		PyObject *a = pstr(t->providers[i]), *b = PyLong_FromLongLong(t->cooling_until_us[i]),
			 *c = PyBool_FromLong(t->loaded[i]);

		if (!a || !b || !c) {
			Py_XDECREF(a);
			Py_XDECREF(b);
			Py_XDECREF(c);
			goto fail;
		}
		PyList_SET_ITEM(names, i, a);
		PyList_SET_ITEM(cool, i, b);
		PyList_SET_ITEM(loaded, i, c);
	}
	if (PUT_S(d, t, name) || dput(d, "falls_back", PyBool_FromLong(t->falls_back)) || PUT_I(d, t, hedge_ms) ||
	    dput(d, "providers", names) || dput(d, "cooling_until_us", cool) || dput(d, "loaded", loaded)) {
		names = cool = loaded = NULL;
		goto fail;
	}
	return d;
fail:
	Py_XDECREF(d);
	Py_XDECREF(names);
	Py_XDECREF(cool);
	Py_XDECREF(loaded);
	return NULL;
}
TRAMPOLINE(tr_tier, const hangar_tier_info *, d_tier)

static PyObject *d_environment(const hangar_environment_info *i)
{
	PyObject *d = PyDict_New();

	if (d && (PUT_S(d, i, name) || PUT_S(d, i, description) || PUT_S(d, i, tier) || PUT_S(d, i, workspace) ||
		  PUT_S(d, i, user) || PUT_I(d, i, timeout_sec) || PUT_I(d, i, network) ||
		  PUT_S(d, i, templates_json) || PUT_S(d, i, env_json) || PUT_S(d, i, image)))
		Py_CLEAR(d);
	return d;
}
TRAMPOLINE(tr_environment, const hangar_environment_info *, d_environment)

static PyObject *d_template(const hangar_template_info *i)
{
	PyObject *d = PyDict_New();

	if (d && (PUT_S(d, i, template_id) || PUT_S(d, i, name) || PUT_S(d, i, status) || PUT_S(d, i, provider)))
		Py_CLEAR(d);
	return d;
}
TRAMPOLINE(tr_template, const hangar_template_info *, d_template)

static PyObject *d_snapshot(const hangar_snapshot_info *i)
{
	PyObject *d = PyDict_New();

	if (d && (PUT_S(d, i, snapshot_id) || PUT_S(d, i, name) || PUT_S(d, i, sandbox_id) || PUT_S(d, i, provider) ||
		  PUT_I(d, i, created_at_us) || dput(d, "released", PyBool_FromLong(i->released != 0))))
		Py_CLEAR(d);
	return d;
}
TRAMPOLINE(tr_snapshot, const hangar_snapshot_info *, d_snapshot)

/* A NULL-terminated list of strings as a Python list. */
static PyObject *pstrv(const char *const *v)
{
	size_t n = 0;
	PyObject *l;

	while (v && v[n])
		n++;
	if (!(l = PyList_New((Py_ssize_t)n)))
		return NULL;
	for (size_t i = 0; i < n; i++) {
		PyObject *s = pstr(v[i]);

		if (!s) {
			Py_DECREF(l);
			return NULL;
		}
		PyList_SET_ITEM(l, (Py_ssize_t)i, s);
	}
	return l;
}

static PyObject *d_image(const hangar_image_info *i)
{
	PyObject *d = PyDict_New();

	if (d && (PUT_S(d, i, digest) || dput(d, "names", pstrv(i->names)) || PUT_S(d, i, config_digest) ||
		  PUT_S(d, i, os) || PUT_S(d, i, architecture) || PUT_U(d, i, size_bytes) ||
		  dput(d, "layers", pstrv(i->layers)) || dput(d, "env", pstrv(i->env)) || PUT_S(d, i, workdir) ||
		  PUT_S(d, i, user) || PUT_I(d, i, created_us) || dput(d, "in_use", PyBool_FromLong(i->in_use))))
		Py_CLEAR(d);
	return d;
}
TRAMPOLINE(tr_image, const hangar_image_info *, d_image)

static int tr_image_progress(const hangar_image_progress *p, void *payload)
{
	PyGILState_STATE g = PyGILState_Ensure();
	int r = cb_call(payload, Py_BuildValue("(NNIIKK)", pstr(p->phase), pstr(p->layer), p->layers_done,
					       p->layers_total, (unsigned long long)p->bytes_done,
					       (unsigned long long)p->bytes_total));

	PyGILState_Release(g);
	return r;
}

static int tr_setting(const char *name, const char *value, int source, void *payload)
{
	PyGILState_STATE g = PyGILState_Ensure();
	int r = cb_call(payload, Py_BuildValue("(NNi)", pstr(name), pstr(value), source));

	PyGILState_Release(g);
	return r;
}

static void tr_output(int stream, const char *data, size_t len, void *payload)
{
	PyGILState_STATE g = PyGILState_Ensure();

	cb_call(payload, Py_BuildValue("(iy#)", stream, data, (Py_ssize_t)len));
	PyGILState_Release(g);
}

static void tr_event(const char *name, const char *json, void *payload)
{
	PyGILState_STATE g = PyGILState_Ensure();

	cb_call(payload, Py_BuildValue("(NN)", pstr(name), pstr(json)));
	PyGILState_Release(g);
}

static void tr_log(int level, const char *message, void *payload)
{
	PyGILState_STATE g = PyGILState_Ensure();

	cb_call(payload, Py_BuildValue("(iN)", level, pstr(message)));
	PyGILState_Release(g);
}

static void tr_template_progress(const char *status, const char *message, void *payload)
{
	PyGILState_STATE g = PyGILState_Ensure();

	cb_call(payload, Py_BuildValue("(NN)", pstr(status), pstr(message)));
	PyGILState_Release(g);
}

static int tr_progress(uint64_t done, uint64_t total, void *payload)
{
	PyGILState_STATE g = PyGILState_Ensure();
	int r = cb_call(payload, Py_BuildValue("(KK)", (unsigned long long)done, (unsigned long long)total));

	PyGILState_Release(g);
	return r;
}

/* A callback that raised stops the call; so does the caller's cancel. */
static int tr_cancel(void *payload)
{
	struct pycb *cb = payload;
	PyGILState_STATE g;
	PyObject *r;
	int stop;

	if (__atomic_load_n(&cb->failed, __ATOMIC_ACQUIRE))
		return 1;
	if (!cb->cancel)
		return 0;
	g = PyGILState_Ensure();
	r = PyObject_CallNoArgs(cb->cancel);
	stop = r ? PyObject_IsTrue(r) : -1;
	Py_XDECREF(r);
	if (stop < 0) {
		PyErr_Fetch(&cb->et, &cb->ev, &cb->tb);
		__atomic_store_n(&cb->failed, 1, __ATOMIC_RELEASE);
		stop = 1;
	}
	PyGILState_Release(g);
	return stop;
}

static int tr_hook(hangar_session *s, hangar_sandbox *sb, int hook, void *payload)
{
	PyGILState_STATE g = PyGILState_Ensure();
	int r = cb_call(payload, Py_BuildValue("(NNi)", SWIG_NewPointerObj(s, SWIGTYPE_p_hangar_session, 0),
					       SWIG_NewPointerObj(sb, SWIGTYPE_p_hangar_sandbox, 0), hook));

	PyGILState_Release(g);
	return r;
}

static const char *opt(const char *s)
{
	return s && *s ? s : NULL;
}
static PyObject *d_publish(const hangar_publish_result *r)
{
	PyObject *d = PyDict_New();

	if (d && (PUT_S(d, r, provider) || PUT_S(d, r, action) || PUT_S(d, r, template_id) || PUT_S(d, r, digest) ||
		  PUT_I(d, r, error) || PUT_S(d, r, message)))
		Py_CLEAR(d);
	return d;
}

static void tr_publish(const hangar_publish_result *r, void *payload)
{
	PyGILState_STATE g = PyGILState_Ensure();

	cb_call(payload, d_publish(r));
	PyGILState_Release(g);
}

%}

/* ---- helpers ------------------------------------------------------------------------- */

%typemap(in) struct pycb *cb "if (SWIG_ConvertPtr($input, (void **)&$1, $descriptor(struct pycb *), 0 | SWIG_POINTER_NO_NULL) < 0) { $1 = NULL; if ($input != Py_None) SWIG_exception_fail(SWIG_TypeError, \"expected a callback holder\"); }"

/* The helpers hold the GIL and release it themselves around the C call. */
%nothread;
%typemap(out) int;
%inline %{
struct pycb;

/* Installed once by hangar/errors.py: code details (a dict) -> exception. */
static PyObject *set_error_factory(PyObject *fn)
{
	Py_XINCREF(fn);
	Py_XSETREF(error_factory, fn);
	Py_RETURN_NONE;
}

/* A callback holder that outlives one call (a process's output, a context's
 * events, log and hooks). Freed with pycb_free() once the C side can no
 * longer call it. */
static struct pycb *pycb_new(PyObject *fn)
{
	struct pycb *cb = calloc(1, sizeof(*cb));

	if (!cb)
		return NULL;
	Py_INCREF(fn);
	cb->fn = fn;
	return cb;
}

static void pycb_free(struct pycb *cb)
{
	if (!cb)
		return;
	Py_XDECREF(cb->fn);
	Py_XDECREF(cb->et);
	Py_XDECREF(cb->ev);
	Py_XDECREF(cb->tb);
	free(cb);
}

/* Raises what the holder's callable raised since the last call, if anything. */
static PyObject *pycb_check(struct pycb *cb)
{
	return cb_finish(cb, 0);
}

static PyObject *py_ctx_set_event(hangar_ctx *ctx, struct pycb *cb)
{
	BLOCKING(hangar_ctx_set_event(ctx, cb ? tr_event : NULL, cb));
	Py_RETURN_NONE;
}

static PyObject *py_ctx_set_log(hangar_ctx *ctx, int max_level, struct pycb *cb)
{
	BLOCKING(hangar_ctx_set_log(ctx, max_level, cb ? tr_log : NULL, cb));
	Py_RETURN_NONE;
}

static PyObject *py_session_set_hook(hangar_ctx *ctx, struct pycb *cb)
{
	BLOCKING(hangar_session_set_hook(ctx, cb ? tr_hook : NULL, cb));
	Py_RETURN_NONE;
}

static PyObject *py_ctx_settings(hangar_ctx *ctx, const char *provider, int all, PyObject *fn)
{
	struct pycb cb = CB_INIT(fn);
	int rc;

	BLOCKING(rc = all ? hangar_ctx_foreach_setting(ctx, tr_setting, &cb) :
			    hangar_ctx_foreach_setting_of(ctx, provider, tr_setting, &cb));
	return cb_finish(&cb, rc);
}

static PyObject *py_provider_foreach(hangar_ctx *ctx, PyObject *fn)
{
	struct pycb cb = CB_INIT(fn);
	int rc;

	BLOCKING(rc = hangar_provider_foreach(ctx, tr_provider, &cb));
	return cb_finish(&cb, rc);
}

static PyObject *py_tier_foreach(hangar_ctx *ctx, PyObject *fn)
{
	struct pycb cb = CB_INIT(fn);
	int rc;

	BLOCKING(rc = hangar_tier_foreach(ctx, tr_tier, &cb));
	return cb_finish(&cb, rc);
}

static PyObject *py_environment_list(hangar_ctx *ctx, const char *name, PyObject *fn)
{
	struct pycb cb = CB_INIT(fn);
	int rc;

	BLOCKING(rc = name ? hangar_environment_get(ctx, name, tr_environment, &cb) :
			     hangar_environment_list(ctx, tr_environment, &cb));
	return cb_finish(&cb, rc);
}

static PyObject *py_template_list(hangar_ctx *ctx, const char *provider, PyObject *fn)
{
	struct pycb cb = CB_INIT(fn);
	int rc;

	BLOCKING(rc = hangar_template_list(ctx, provider, tr_template, &cb));
	return cb_finish(&cb, rc);
}

static PyObject *py_snapshot_list(hangar_ctx *ctx, const char *provider, PyObject *fn)
{
	struct pycb cb = CB_INIT(fn);
	int rc;

	BLOCKING(rc = hangar_snapshot_list(ctx, provider, tr_snapshot, &cb));
	return cb_finish(&cb, rc);
}

static PyObject *py_image_list(hangar_ctx *ctx, const char *ref, PyObject *fn)
{
	struct pycb cb = CB_INIT(fn);
	int rc;

	BLOCKING(rc = ref ? hangar_image_inspect(ctx, ref, tr_image, &cb) : hangar_image_list(ctx, tr_image, &cb));
	return cb_finish(&cb, rc);
}

static PyObject *py_image_import(hangar_ctx *ctx, const char *path, const char *name, PyObject *fn)
{
	hangar_image_opts o = HANGAR_IMAGE_OPTS_INIT;
	hangar_buf digest = HANGAR_BUF_INIT;
	struct pycb cb = CB_INIT(fn);
	PyObject *r;
	int rc;

	o.name = opt(name);
	if (fn != Py_None) {
		o.progress = tr_image_progress;
		o.progress_payload = &cb;
	}
	BLOCKING(rc = hangar_image_import(&digest, ctx, path, &o));
	r = cb_finish(&cb, rc);
	if (r) {
		Py_DECREF(r);
		r = pstr(digest.ptr ? digest.ptr : "");
	}
	hangar_buf_dispose(&digest);
	return r;
}

/* fn (None: none) gets each progress tuple; cancel (None: never) is asked while the pull runs. */
static PyObject *py_image_pull(hangar_ctx *ctx, const char *reference, PyObject *fn, PyObject *cancel)
{
	hangar_image_opts o = HANGAR_IMAGE_OPTS_INIT;
	hangar_buf digest = HANGAR_BUF_INIT;
	struct pycb cb = CB_INIT(fn);
	PyObject *r;
	int rc;

	if (fn != Py_None) {
		o.progress = tr_image_progress;
		o.progress_payload = &cb;
	}
	if (cancel != Py_None) {
		cb.cancel = cancel;
		o.cancel = tr_cancel;
		o.cancel_payload = &cb;
	}
	BLOCKING(rc = hangar_image_pull(&digest, ctx, reference, &o));
	r = cb_finish(&cb, rc);
	if (r) {
		Py_DECREF(r);
		r = pstr(digest.ptr ? digest.ptr : "");
	}
	hangar_buf_dispose(&digest);
	return r;
}

static PyObject *py_image_gc(hangar_ctx *ctx, uint64_t max_bytes)
{
	uint64_t freed = 0;
	int rc;

	BLOCKING(rc = hangar_image_gc(&freed, ctx, max_bytes));
	if (rc < 0) {
		raise_last(rc);
		return NULL;
	}
	return PyLong_FromUnsignedLongLong((unsigned long long)freed);
}

static PyObject *py_template_build(hangar_ctx *ctx, const char *provider, const char *name, const char *image,
				   uint32_t cpu_millis, uint32_t memory_mb, uint32_t disk_mb, PyObject *fn)
{
	hangar_template_build_opts o = HANGAR_TEMPLATE_BUILD_OPTS_INIT;
	hangar_buf id = HANGAR_BUF_INIT;
	struct pycb cb = CB_INIT(fn);
	PyObject *r;
	int rc;

	o.name = name;
	o.image = image;
	o.cpu_millis = cpu_millis;
	o.memory_mb = memory_mb;
	o.disk_mb = disk_mb;
	o.progress = fn != Py_None ? tr_template_progress : NULL;
	o.payload = &cb;
	BLOCKING(rc = hangar_template_build(&id, ctx, provider, &o));
	r = cb_finish(&cb, rc);
	if (r) {
		Py_DECREF(r);
		r = pstr(id.ptr ? id.ptr : "");
	}
	hangar_buf_dispose(&id);
	return r;
}

/* fn gets each provider's result; progress (None: none) each build's (status, message). */
static PyObject *py_environment_publish(hangar_ctx *ctx, const char *name, int rebuild, PyObject *fn,
					PyObject *progress)
{
	hangar_publish_opts o = HANGAR_PUBLISH_OPTS_INIT;
	struct pycb cb = CB_INIT(fn), pcb = CB_INIT(progress);
	PyObject *r;
	int rc;

	o.rebuild = rebuild;
	if (progress != Py_None) {
		o.progress = tr_template_progress;
		o.progress_payload = &pcb;
	}
	BLOCKING(rc = hangar_environment_publish(ctx, name, &o, tr_publish, &cb));
	r = cb_finish(&cb, rc);
	if (!pcb.failed)
		return r;
	if (!r) {
		/* The results' own error wins; the progress callback's is dropped. */
		Py_XDECREF(pcb.et);
		Py_XDECREF(pcb.ev);
		Py_XDECREF(pcb.tb);
		return NULL;
	}
	Py_DECREF(r);
	return cb_finish(&pcb, 0);
}

static PyObject *py_sandbox_create(hangar_ctx *ctx, const char *provider, const char *template_id,
				   int64_t timeout_sec, char **env, int32_t network, const char *tier,
				   const char *environment)
{
	hangar_create_opts o = HANGAR_CREATE_OPTS_INIT;
	hangar_sandbox *sb = NULL;
	int rc;

	o.provider = opt(provider);
	o.template_id = opt(template_id);
	o.timeout_sec = timeout_sec;
	o.env = (const char *const *)env;
	o.network = network;
	o.tier = opt(tier);
	o.environment = opt(environment);
	BLOCKING(rc = hangar_sandbox_create(&sb, ctx, &o));
	if (rc < 0) {
		raise_last(rc);
		return NULL;
	}
	return SWIG_NewPointerObj(sb, SWIGTYPE_p_hangar_sandbox, 0);
}

static PyObject *py_sandbox_get_info(hangar_sandbox *sb)
{
	hangar_sandbox_info i = HANGAR_SANDBOX_INFO_INIT;
	int rc;

	BLOCKING(rc = hangar_sandbox_get_info(&i, sb));
	if (rc < 0) {
		raise_last(rc);
		return NULL;
	}
	return d_sandbox_info(&i);
}

/* (url, socket_path, access_token, [headers]) */
static PyObject *py_sandbox_envd_endpoint(hangar_sandbox *sb)
{
	hangar_envd_endpoint e = HANGAR_ENVD_ENDPOINT_INIT;
	PyObject *headers;
	int rc = hangar_sandbox_envd_endpoint(&e, sb);

	if (rc < 0) {
		raise_last(rc);
		return NULL;
	}
	headers = pstr_list(e.headers);
	if (!headers)
		return NULL;
	return Py_BuildValue("(NNNN)", pstr(e.url), pstr(e.socket_path), pstr(e.access_token), headers);
}

/* (url, [headers]) */
static PyObject *py_sandbox_port_endpoint(hangar_sandbox *sb, uint32_t port)
{
	hangar_port_endpoint e = HANGAR_PORT_ENDPOINT_INIT;
	PyObject *headers, *url;
	int rc = hangar_sandbox_port_endpoint(&e, sb, port);

	if (rc < 0) {
		raise_last(rc);
		return NULL;
	}
	headers = pstr_list(e.headers);
	url = headers ? pstr(e.url) : NULL;
	hangar_buf_dispose(&e.storage);
	if (!url) {
		Py_XDECREF(headers);
		return NULL;
	}
	return Py_BuildValue("(NN)", url, headers);
}

static PyObject *py_sandbox_list(hangar_ctx *ctx, const char *provider, PyObject *fn)
{
	struct pycb cb = CB_INIT(fn);
	int rc;

	BLOCKING(rc = hangar_sandbox_list(ctx, provider, tr_sandbox_info, &cb));
	return cb_finish(&cb, rc);
}

static PyObject *py_sandbox_provider_name(hangar_sandbox *sb)
{
	return pstr(hangar_provider_name(hangar_sandbox_provider(sb)));
}

/*
 * exec: the result as (exit_code, timed_out, stdout, stderr, stdout_bytes,
 * stderr_bytes, duration_us, oom_killed). An exception raised by on_output
 * cancels the command, and is what the caller gets.
 */
static PyObject *py_sandbox_exec(hangar_sandbox *sb, const char *command, int64_t timeout_sec, const char *cwd,
				 const char *user, char **env, uint64_t output_limit, PyObject *stdin_data,
				 PyObject *fn, PyObject *cancel)
{
	hangar_exec_opts o = HANGAR_EXEC_OPTS_INIT;
	hangar_exec_result res = HANGAR_EXEC_RESULT_INIT;
	struct pycb cb = CB_INIT(fn);
	Py_buffer in = { 0 };
	PyObject *r;
	int rc;

	if (stdin_data != Py_None) {
		if (PyObject_GetBuffer(stdin_data, &in, PyBUF_SIMPLE) < 0)
			return NULL;
		o.stdin_data = in.buf;
		o.stdin_len = (size_t)in.len;
	}
	o.timeout_sec = timeout_sec;
	o.cwd = opt(cwd);
	o.user = opt(user);
	o.env = (const char *const *)env;
	o.output_limit = output_limit;
	if (fn != Py_None)
		o.on_output = tr_output;
	if (cancel != Py_None)
		cb.cancel = cancel;
	if (fn != Py_None || cancel != Py_None) {
		o.cancel = tr_cancel;
		o.payload = &cb;
	}
	BLOCKING(rc = hangar_sandbox_exec(&res, sb, command, &o));
	if (in.obj)
		PyBuffer_Release(&in);
	r = cb_finish(&cb, rc);
	if (r) {
		Py_DECREF(r);
		r = Py_BuildValue("(iiy#y#KKLi)", res.exit_code, res.timed_out, res.out.ptr ? res.out.ptr : "",
				  (Py_ssize_t)res.out.size, res.err.ptr ? res.err.ptr : "", (Py_ssize_t)res.err.size,
				  (unsigned long long)res.out_bytes, (unsigned long long)res.err_bytes,
				  (long long)res.duration_us, res.oom_killed);
	}
	hangar_exec_result_dispose(&res);
	return r;
}

static PyObject *py_sandbox_copy_out(hangar_sandbox *sb, const char *remote_path, const char *local_path,
				     uint64_t limit_bytes, int64_t timeout_sec, PyObject *cancel)
{
	hangar_copy_opts o = HANGAR_COPY_OPTS_INIT;
	struct pycb cb = CB_INIT(Py_None);
	int rc;

	o.limit_bytes = limit_bytes;
	o.timeout_sec = timeout_sec;
	if (cancel != Py_None) {
		cb.cancel = cancel;
		o.cancel = tr_cancel;
		o.payload = &cb;
	}
	BLOCKING(rc = hangar_sandbox_copy_out(sb, remote_path, local_path, &o));
	return cb_finish(&cb, rc);
}

static PyObject *py_sandbox_list_files(hangar_sandbox *sb, const char *path, uint32_t depth, int stat_only,
				       PyObject *fn)
{
	struct pycb cb = CB_INIT(fn);
	int rc;

	BLOCKING(rc = stat_only ? hangar_sandbox_stat(sb, path, tr_file_info, &cb) :
				  hangar_sandbox_list_files(sb, path, depth, tr_file_info, &cb));
	return cb_finish(&cb, rc);
}

static PyObject *py_sandbox_fork(hangar_sandbox *sb, uint32_t count, PyObject *fn)
{
	struct pycb cb = CB_INIT(fn);
	int rc;

	BLOCKING(rc = hangar_sandbox_fork(sb, count, tr_fork, &cb));
	return cb_finish(&cb, rc);
}

static PyObject *py_sandbox_metrics(hangar_sandbox *sb, PyObject *fn)
{
	struct pycb cb = CB_INIT(fn);
	int rc;

	BLOCKING(rc = hangar_sandbox_metrics(sb, tr_metric, &cb));
	return cb_finish(&cb, rc);
}

static PyObject *py_sandbox_logs(hangar_sandbox *sb, PyObject *fn)
{
	struct pycb cb = CB_INIT(fn);
	int rc;

	BLOCKING(rc = hangar_sandbox_logs(sb, tr_log_entry, &cb));
	return cb_finish(&cb, rc);
}

/* A process's holder (cb) receives its output until the handle is released. */
static PyObject *py_process_start(hangar_sandbox *sb, const char *command, uint32_t pid, const char *cwd,
				  const char *user, char **env, int32_t pty, uint32_t cols, uint32_t rows,
				  int32_t stdin_enabled, int64_t timeout_sec, struct pycb *cb)
{
	hangar_process_opts o = HANGAR_PROCESS_OPTS_INIT;
	hangar_process *p = NULL;
	int rc;

	o.cwd = opt(cwd);
	o.user = opt(user);
	o.env = (const char *const *)env;
	o.pty = pty;
	o.cols = cols;
	o.rows = rows;
	o.stdin_enabled = stdin_enabled;
	o.timeout_sec = timeout_sec;
	o.on_output = cb ? tr_output : NULL;
	o.payload = cb;
	BLOCKING(rc = pid ? hangar_process_attach(&p, sb, pid, &o) : hangar_process_start(&p, sb, command, &o));
	if (rc < 0) {
		raise_last(rc);
		return NULL;
	}
	return SWIG_NewPointerObj(p, SWIGTYPE_p_hangar_process, 0);
}

static PyObject *py_checkpoint_create(hangar_sandbox *sb, const char *workspace, int32_t select, uint32_t flags,
				      const char *session_id, const char *parent_id, PyObject *blob, char **labels,
				      const char *user, int64_t timeout_sec, PyObject *fn)
{
	hangar_checkpoint_opts o = HANGAR_CHECKPOINT_OPTS_INIT;
	hangar_checkpoint *cp = NULL;
	struct pycb cb = CB_INIT(fn);
	Py_buffer b = { 0 };
	PyObject *r;
	int rc;

	if (blob != Py_None) {
		if (PyObject_GetBuffer(blob, &b, PyBUF_SIMPLE) < 0)
			return NULL;
		o.blob = b.buf;
		o.blob_len = (size_t)b.len;
	}
	o.workspace = opt(workspace);
	o.select = select;
	o.flags = flags;
	o.session_id = opt(session_id);
	o.parent_id = opt(parent_id);
	o.labels = (const char *const *)labels;
	o.user = opt(user);
	o.timeout_sec = timeout_sec;
	if (fn != Py_None) {
		o.progress = tr_progress;
		o.progress_payload = &cb;
	}
	BLOCKING(rc = hangar_checkpoint_create(&cp, sb, &o));
	if (b.obj)
		PyBuffer_Release(&b);
	r = cb_finish(&cb, rc);
	if (r) {
		Py_DECREF(r);
		return SWIG_NewPointerObj(cp, SWIGTYPE_p_hangar_checkpoint, 0);
	}
	hangar_checkpoint_unref(cp);
	return NULL;
}

static PyObject *py_checkpoint_get_info(hangar_checkpoint *cp)
{
	hangar_checkpoint_info i = HANGAR_CHECKPOINT_INFO_INIT;
	int rc;

	BLOCKING(rc = hangar_checkpoint_get_info(&i, cp));
	if (rc < 0) {
		raise_last(rc);
		return NULL;
	}
	return d_checkpoint_info(&i);
}

static PyObject *py_checkpoint_list(hangar_ctx *ctx, const char *session_id, PyObject *fn)
{
	struct pycb cb = CB_INIT(fn);
	int rc;

	BLOCKING(rc = hangar_checkpoint_list(ctx, session_id, tr_checkpoint, &cb));
	return cb_finish(&cb, rc);
}

/* restore into sb, or with sb NULL export to local_path. */
static PyObject *py_checkpoint_restore(hangar_sandbox *sb, hangar_checkpoint *cp, const char *local_path,
				       const char *workspace, uint32_t flags, const char *user, int64_t timeout_sec,
				       PyObject *fn)
{
	hangar_restore_opts o = HANGAR_RESTORE_OPTS_INIT;
	struct pycb cb = CB_INIT(fn);
	int rc;

	o.workspace = opt(workspace);
	o.flags = flags;
	o.user = opt(user);
	o.timeout_sec = timeout_sec;
	if (fn != Py_None) {
		o.progress = tr_progress;
		o.progress_payload = &cb;
	}
	BLOCKING(rc = sb ? hangar_checkpoint_restore(sb, cp, &o) : hangar_checkpoint_export(cp, local_path, &o));
	return cb_finish(&cb, rc);
}

static PyObject *py_session_create(hangar_ctx *ctx, const char *id, const char *environment,
				   const char *provider, const char *template_id, int64_t timeout_sec, char **env,
				   int32_t network, const char *tier, const char *workspace, const char *user,
				   char **labels, uint32_t flags)
{
	hangar_session_opts o = HANGAR_SESSION_OPTS_INIT;
	hangar_create_opts c = HANGAR_CREATE_OPTS_INIT;
	hangar_session *s = NULL;
	int rc;

	c.provider = opt(provider);
	c.template_id = opt(template_id);
	c.timeout_sec = timeout_sec;
	c.env = (const char *const *)env;
	c.network = network;
	c.tier = opt(tier);
	o.id = opt(id);
	o.environment = opt(environment);
	o.create = &c;
	o.workspace = opt(workspace);
	o.user = opt(user);
	o.labels = (const char *const *)labels;
	o.flags = flags;
	BLOCKING(rc = hangar_session_create(&s, ctx, &o));
	if (rc < 0) {
		raise_last(rc);
		return NULL;
	}
	return SWIG_NewPointerObj(s, SWIGTYPE_p_hangar_session, 0);
}

static PyObject *py_session_suspend(hangar_session *s, PyObject *blob, char **labels, uint32_t flags,
				    int64_t timeout_sec)
{
	hangar_suspend_opts o = HANGAR_SUSPEND_OPTS_INIT;
	Py_buffer b = { 0 };
	int rc;

	if (blob != Py_None) {
		if (PyObject_GetBuffer(blob, &b, PyBUF_SIMPLE) < 0)
			return NULL;
		o.blob = b.buf;
		o.blob_len = (size_t)b.len;
	}
	o.labels = (const char *const *)labels;
	o.flags = flags;
	o.timeout_sec = timeout_sec;
	BLOCKING(rc = hangar_session_suspend(s, &o));
	if (b.obj)
		PyBuffer_Release(&b);
	return cb_finish(NULL, rc);
}

static PyObject *py_session_get_info(hangar_session *s)
{
	hangar_session_info i = HANGAR_SESSION_INFO_INIT;
	int rc;

	BLOCKING(rc = hangar_session_get_info(&i, s));
	if (rc < 0) {
		raise_last(rc);
		return NULL;
	}
	return d_session_info(&i);
}

static PyObject *py_session_list(hangar_ctx *ctx, PyObject *fn)
{
	struct pycb cb = CB_INIT(fn);
	int rc;

	BLOCKING(rc = hangar_session_list(ctx, tr_session_info, &cb));
	return cb_finish(&cb, rc);
}

static PyObject *py_ctx_reap(hangar_ctx *ctx, const char *lease, uint32_t lease_seconds)
{
	hangar_reap_result r = HANGAR_REAP_RESULT_INIT;
	int rc;

	BLOCKING(rc = hangar_ctx_reap(&r, ctx, lease, lease_seconds));
	if (rc < 0) {
		raise_last(rc);
		return NULL;
	}
	return Py_BuildValue("{s:N,s:I,s:I,s:L}", "leader", PyBool_FromLong(r.leader), "sessions_reaped",
			     r.sessions_reaped, "records_forgotten", r.records_forgotten, "lease_expires_us",
			     (long long)r.lease_expires_us);
}

/* cancel (None: never) is asked while the fork runs; yes gives it up, keeping nothing. */
static PyObject *py_session_fork(hangar_session *s, uint32_t count, PyObject *fn, PyObject *cancel)
{
	hangar_session_fork_opts o = HANGAR_SESSION_FORK_OPTS_INIT;
	struct pycb cb = CB_INIT(fn);
	int rc;

	if (cancel == Py_None) {
		BLOCKING(rc = hangar_session_fork(s, count, tr_session_fork, &cb));
	} else {
		cb.cancel = cancel;
		o.cancel = tr_cancel;
		o.cancel_payload = &cb;
		BLOCKING(rc = hangar_session_fork_ext(s, count, &o, tr_session_fork, &cb));
	}
	return cb_finish(&cb, rc);
}
%}

/* ---- hangar.aio's hand-off ------------------------------------------------------------ */

/*
 * A call awaited on an asyncio loop runs on a pool of plain pthreads that
 * never take the GIL: the arguments are copied on the loop thread, the
 * library call runs on the pool, and its end is queued on the loop's port
 * and announced through the port's eventfd, which the loop watches with
 * add_reader(). A Python thread would wake once for the call and again for
 * the GIL, then wake the loop through call_soon_threadsafe(); here the
 * worker wakes once and the loop once per batch of ends, and the result is
 * built on the loop thread, where the GIL already is.
 *
 * Only calls without Python callbacks come here (hangar/aio.py routes the
 * others to its Python threads), so nothing on the pool touches Python.
 * A job is freed by whichever of its capsule and the port's drain comes
 * last; both run with the GIL, so that count needs no atomics.
 */
%{
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/eventfd.h>
#include <unistd.h>

/* As many threads as calls a program keeps going at once, up to this. */
#define AIO_MAX_THREADS 256

struct aio_port;

struct aio_job {
	struct aio_job *next;
	struct aio_port *port;
	PyObject *token;         /* handed back by the drain; GIL */
	int refs;                /* the capsule and the port; GIL */
	atomic_int stop;         /* set by cancel, read by the library's cancel polls */
	int ran;                 /* written before the job is queued on its port */
	/* the call's copied arguments */
	hangar_sandbox *sb;
	char *command, *cwd, *user, **env;
	Py_buffer in;            /* released on the loop thread */
	hangar_exec_opts o;
	/* its outcome */
	int rc;
	hangar_exec_result res;
	hangar_error err;        /* a copy of the worker thread's last error */
	char *err_message, *err_provider_code;
};

struct aio_port {
	int fd;                  /* eventfd: readable while ends wait to be drained */
	int jobs;                /* queued or running; GIL */
	pthread_mutex_t lock;
	struct aio_job *done;    /* ended, newest first; lock */
};

static pthread_mutex_t aio_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t aio_wake = PTHREAD_COND_INITIALIZER;
static struct aio_job *aio_queue, **aio_tail = &aio_queue;
static unsigned aio_queued, aio_idle, aio_threads;

static void aio_port_free(struct aio_port *port)
{
	close(port->fd);
	pthread_mutex_destroy(&port->lock);
	free(port);
}

static void aio_job_free(struct aio_job *j)
{
	free(j->command);
	free(j->cwd);
	free(j->user);
	strv_free(j->env);
	if (j->in.obj)
		PyBuffer_Release(&j->in);
	hangar_exec_result_dispose(&j->res);
	free(j->err_message);
	free(j->err_provider_code);
	Py_XDECREF(j->token);
	free(j);
}

static void aio_job_unref(struct aio_job *j)
{
	if (--j->refs == 0)
		aio_job_free(j);
}

static int aio_cancel_poll(void *payload)
{
	struct aio_job *j = payload;

	return atomic_load_explicit(&j->stop, memory_order_relaxed);
}

static char *dup_or_null(const char *s)
{
	return s ? strdup(s) : NULL;
}

static void aio_run(struct aio_job *j)
{
	struct aio_port *port = j->port;
	int first;

	if (!atomic_load(&j->stop)) {
		j->ran = 1;
		j->rc = hangar_sandbox_exec(&j->res, j->sb, j->command, &j->o);
		if (j->rc < 0) {
			/* The error is this thread's: copy it for the loop thread. */
			const hangar_error *e = hangar_error_last();

			j->err = *e;
			if (e->code == j->rc) {
				j->err_message = dup_or_null(e->message);
				j->err_provider_code = dup_or_null(e->provider_code);
			} else {
				j->err.code = 0;
			}
		}
	}
	pthread_mutex_lock(&port->lock);
	first = port->done == NULL;
	j->next = port->done;
	port->done = j;
	pthread_mutex_unlock(&port->lock);
	if (first) {
		/* One wake-up per batch: the drain takes every end queued so far. */
		uint64_t one = 1;

		while (write(port->fd, &one, sizeof(one)) < 0 && errno == EINTR)
			;
	}
}

static void *aio_worker(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&aio_lock);
	for (;;) {
		struct aio_job *j;

		while (!aio_queue) {
			aio_idle++;
			pthread_cond_wait(&aio_wake, &aio_lock);
			aio_idle--;
		}
		j = aio_queue;
		aio_queue = j->next;
		if (!aio_queue)
			aio_tail = &aio_queue;
		aio_queued--;
		pthread_mutex_unlock(&aio_lock);
		aio_run(j);
		pthread_mutex_lock(&aio_lock);
	}
	return NULL;
}

/* A forked child has none of the parent's threads: it starts a pool of its own. */
static void aio_atfork_child(void)
{
	pthread_mutex_init(&aio_lock, NULL);
	pthread_cond_init(&aio_wake, NULL);
	aio_queue = NULL;
	aio_tail = &aio_queue;
	aio_queued = aio_idle = aio_threads = 0;
}

static void aio_atfork_child_register(void)
{
	pthread_atfork(NULL, NULL, aio_atfork_child);
}

/* Queues j and starts a thread when every idle one already has a job. Returns 0, or -1 with a Python error. */
static int aio_submit(struct aio_job *j)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	pthread_attr_t attr;
	sigset_t all, old;
	pthread_t t;
	int rc = 0;

	pthread_once(&once, aio_atfork_child_register);
	pthread_mutex_lock(&aio_lock);
	j->next = NULL;
	*aio_tail = j;
	aio_tail = &j->next;
	aio_queued++;
	if (aio_queued > aio_idle && aio_threads < AIO_MAX_THREADS) {
		/* Signals stay with the threads that handle them; the pool only waits in the library. */
		sigfillset(&all);
		pthread_sigmask(SIG_SETMASK, &all, &old);
		pthread_attr_init(&attr);
		pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
		rc = pthread_create(&t, &attr, aio_worker, NULL);
		pthread_attr_destroy(&attr);
		pthread_sigmask(SIG_SETMASK, &old, NULL);
		if (rc == 0)
			aio_threads++;
		else if (aio_threads > 0)
			rc = 0; /* the running threads get to it */
	}
	if (rc) {
		/* No thread at all to run it: take it back. */
		struct aio_job **p = &aio_queue;

		while (*p != j)
			p = &(*p)->next;
		*p = NULL;
		aio_tail = p;
		aio_queued--;
	} else {
		pthread_cond_signal(&aio_wake);
	}
	pthread_mutex_unlock(&aio_lock);
	if (rc) {
		errno = rc;
		PyErr_SetFromErrno(PyExc_OSError);
		return -1;
	}
	return 0;
}

#define AIO_PORT "hangar.aio_port"
#define AIO_JOB "hangar.aio_job"

static void aio_port_capsule_free(PyObject *cap)
{
	struct aio_port *port = PyCapsule_GetPointer(cap, AIO_PORT);

	if (!port)
		return;
	/*
	 * hangar/aio.py keeps the capsule until every job has been drained. If
	 * it could not (the interpreter is going away with calls still running),
	 * the port stays: the workers still write to it.
	 */
	if (port->jobs == 0)
		aio_port_free(port);
}

static void aio_job_capsule_free(PyObject *cap)
{
	struct aio_job *j = PyCapsule_GetPointer(cap, AIO_JOB);

	if (j)
		aio_job_unref(j);
}

static struct aio_port *aio_port_of(PyObject *cap)
{
	return PyCapsule_GetPointer(cap, AIO_PORT);
}
%}

%inline %{
/* A port for one loop: (capsule, fd). The fd is the port's to close. */
static PyObject *aio_port_new(void)
{
	struct aio_port *port = calloc(1, sizeof(*port));
	PyObject *cap;

	if (!port)
		return PyErr_NoMemory();
	port->fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (port->fd < 0) {
		free(port);
		return PyErr_SetFromErrno(PyExc_OSError);
	}
	pthread_mutex_init(&port->lock, NULL);
	cap = PyCapsule_New(port, AIO_PORT, aio_port_capsule_free);
	if (!cap) {
		aio_port_free(port);
		return NULL;
	}
	return Py_BuildValue("(Ni)", cap, port->fd);
}

/*
 * Starts exec on the pool; its end comes out of aio_port_drain(port) with
 * token. Returns the job, for aio_cancel(). The arguments are as
 * py_sandbox_exec()'s without the callbacks; sb must stay alive (its
 * handle held) until the drain.
 */
static PyObject *aio_exec(PyObject *port_cap, PyObject *token, hangar_sandbox *sb, const char *command,
			  int64_t timeout_sec, const char *cwd, const char *user, char **env, uint64_t output_limit,
			  PyObject *stdin_data)
{
	struct aio_port *port = aio_port_of(port_cap);
	struct aio_job *j;
	PyObject *cap;

	if (!port)
		return NULL;
	if (!sb || !command) {
		PyErr_SetString(PyExc_ValueError, "aio_exec: no sandbox or no command");
		return NULL;
	}
	j = calloc(1, sizeof(*j));
	if (!j)
		return PyErr_NoMemory();
	j->refs = 1;
	j->res = (hangar_exec_result)HANGAR_EXEC_RESULT_INIT;
	j->o = (hangar_exec_opts)HANGAR_EXEC_OPTS_INIT;
	j->sb = sb;
	Py_INCREF(token);
	j->token = token;
	if (!(j->command = strdup(command)) || (cwd && !(j->cwd = strdup(cwd))) ||
	    (user && !(j->user = strdup(user)))) {
		aio_job_free(j);
		return PyErr_NoMemory();
	}
	if (env) {
		size_t n = 0;

		while (env[n])
			n++;
		if (!(j->env = calloc(n + 1, sizeof(char *)))) {
			aio_job_free(j);
			return PyErr_NoMemory();
		}
		for (size_t i = 0; i < n; i++) {
			if (!(j->env[i] = strdup(env[i]))) {
				aio_job_free(j);
				return PyErr_NoMemory();
			}
		}
	}
	if (stdin_data != Py_None) {
		/* Held, not copied: the buffer cannot change size while it is exported. */
		if (PyObject_GetBuffer(stdin_data, &j->in, PyBUF_SIMPLE) < 0) {
			aio_job_free(j);
			return NULL;
		}
		j->o.stdin_data = j->in.buf;
		j->o.stdin_len = (size_t)j->in.len;
	}
	j->o.timeout_sec = timeout_sec;
	j->o.cwd = j->cwd && *j->cwd ? j->cwd : NULL;
	j->o.user = j->user && *j->user ? j->user : NULL;
	j->o.env = (const char *const *)j->env;
	j->o.output_limit = output_limit;
	j->o.cancel = aio_cancel_poll;
	j->o.payload = j;
	cap = PyCapsule_New(j, AIO_JOB, aio_job_capsule_free);
	if (!cap) {
		aio_job_free(j);
		return NULL;
	}
	j->refs = 2; /* the capsule, and the port until the drain */
	j->port = port;
	port->jobs++;
	if (aio_submit(j) < 0) {
		port->jobs--;
		j->refs = 1;
		Py_DECREF(cap);
		return NULL;
	}
	return cap;
}

/* Asks a job to stop: before it starts, it never runs; while it runs, the library's cancel poll sees it. */
static PyObject *aio_cancel(PyObject *job_cap)
{
	struct aio_job *j = PyCapsule_GetPointer(job_cap, AIO_JOB);

	if (!j)
		return NULL;
	atomic_store(&j->stop, 1);
	Py_RETURN_NONE;
}

/*
 * The jobs that ended since the last drain, in the order they ended, as
 * (token, ran, result, error): result is exec's tuple (as py_sandbox_exec()
 * returns it) or None, error the HangarError instance or None.
 */
static PyObject *aio_port_drain(PyObject *port_cap)
{
	struct aio_port *port = aio_port_of(port_cap);
	struct aio_job *done, *rev = NULL;
	PyObject *list;
	uint64_t n;

	if (!port)
		return NULL;
	while (read(port->fd, &n, sizeof(n)) < 0 && errno == EINTR)
		;
	pthread_mutex_lock(&port->lock);
	done = port->done;
	port->done = NULL;
	pthread_mutex_unlock(&port->lock);
	while (done) {
		struct aio_job *next = done->next;

		done->next = rev;
		rev = done;
		done = next;
	}
	list = PyList_New(0);
	while (rev) {
		struct aio_job *j = rev;
		PyObject *item = NULL, *result = NULL, *error = NULL;

		rev = j->next;
		if (list && j->ran && j->rc >= 0) {
			hangar_exec_result *r = &j->res;

			result = Py_BuildValue("(iiy#y#KKLi)", r->exit_code, r->timed_out, r->out.ptr ? r->out.ptr : "",
					       (Py_ssize_t)r->out.size, r->err.ptr ? r->err.ptr : "", (Py_ssize_t)r->err.size,
					       (unsigned long long)r->out_bytes, (unsigned long long)r->err_bytes,
					       (long long)r->duration_us, r->oom_killed);
		} else if (list && j->ran) {
			PyObject *et, *ev, *tb;

			j->err.message = j->err_message ? j->err_message : hangar_strerror(j->rc);
			j->err.provider_code = j->err_provider_code ? j->err_provider_code : "";
			if (!j->err.code) {
				j->err.category = 0;
				j->err.os_errno = j->err.http_status = j->err.retry_after_s = 0;
				j->err.flags = 0;
			}
			j->err.code = j->rc;
			raise_error(j->rc, &j->err);
			PyErr_Fetch(&et, &ev, &tb);
			PyErr_NormalizeException(&et, &ev, &tb);
			if (ev && tb)
				PyException_SetTraceback(ev, tb);
			Py_XDECREF(et);
			Py_XDECREF(tb);
			error = ev;
		}
		if (list && (!j->ran || result || error))
			item = Py_BuildValue("(OiOO)", j->token, j->ran, result ? result : Py_None,
					     error ? error : Py_None);
		Py_XDECREF(result);
		Py_XDECREF(error);
		/* The token holds the job's capsule: the job must not hold it back; the input is the caller's again. */
		Py_CLEAR(j->token);
		if (j->in.obj)
			PyBuffer_Release(&j->in);
		if (!item || PyList_Append(list, item) < 0)
			Py_CLEAR(list);
		Py_XDECREF(item);
		port->jobs--;
		aio_job_unref(j);
	}
	return list;
}
%}
