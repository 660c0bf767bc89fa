/*
 * POST /v1/sandboxes/{id}/exec: a command's whole result, or with
 * ?stream=1 (or /exec/stream) newline-delimited JSON events as output
 * arrives, then one "exit" event.
 *
 * JSON strings carry text, and a command's output need not be text: each
 * output is sent as a string when it is valid UTF-8, else base64 with an
 * "encoding" of "base64" beside it ("stdout_encoding" in a whole result,
 * "encoding" in a stream event). "encoding":"base64" in the request asks for
 * base64 always. Input goes as "stdin" (text) or "stdin_base64".
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "hangard.h"

/* Whether bytes are valid UTF-8 (no overlongs, surrogates, or > U+10FFFF). */
static int utf8_valid(const unsigned char *s, size_t n)
{
	size_t i = 0;
	while (i < n) {
		unsigned c = s[i];
		size_t len;
		unsigned cp;
		if (c < 0x80) {
			i++;
			continue;
		}
		if (c >= 0xc2 && c <= 0xdf) {
			len = 2;
			cp = c & 0x1f;
		} else if (c >= 0xe0 && c <= 0xef) {
			len = 3;
			cp = c & 0x0f;
		} else if (c >= 0xf0 && c <= 0xf4) {
			len = 4;
			cp = c & 0x07;
		} else {
			return 0;
		}
		if (i + len > n)
			return 0;
		for (size_t k = 1; k < len; k++) {
			if ((s[i + k] & 0xc0) != 0x80)
				return 0;
			cp = (cp << 6) | (s[i + k] & 0x3f);
		}
		if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
		    (cp >= 0xd800 && cp <= 0xdfff))
			return 0;
		i += len;
	}
	return 1;
}

/* Adds key (and key_encoding when base64 is used) to obj. */
static void add_bytes(cJSON *obj, const char *key, const char *enc_key, const char *data, size_t len, int force_b64)
{
	if (!force_b64 && utf8_valid((const unsigned char *)data, len) && !memchr(data, '\0', len)) {
		char *text = malloc(len + 1);
		if (text) {
			memcpy(text, data, len);
			text[len] = '\0';
			cJSON_AddStringToObject(obj, key, text);
			free(text);
		}
		cJSON_AddStringToObject(obj, enc_key, "utf-8");
		return;
	}
	size_t blen = sodium_base64_encoded_len(len, sodium_base64_VARIANT_ORIGINAL);
	char *b = malloc(blen);
	if (b) {
		sodium_bin2base64(b, blen, (const unsigned char *)data, len, sodium_base64_VARIANT_ORIGINAL);
		cJSON_AddStringToObject(obj, key, b);
		free(b);
	}
	cJSON_AddStringToObject(obj, enc_key, "base64");
}

struct exec_req {
	cJSON *doc;
	const char *command;
	char **env;
	unsigned char *stdin_buf;
	int force_b64;
	hangar_exec_opts opts;
};

static const char *const exec_fields[] = { "command", "timeout", "cwd", "user", "env", "stdin",
					   "stdin_base64", "encoding", "output_limit", NULL };

static int cancel_on_stop(void *payload)
{
	(void)payload;
	return hangard->stopping == 2;
}

/* Reads the body into e; answers and returns -1 when it is wrong. */
static int parse_exec(struct request *r, struct exec_req *e)
{
	const char *cwd, *user, *in, *in64, *enc;
	int64_t timeout = 0, limit = 0;
	int failed;

	memset(e, 0, sizeof(*e));
	hangar_exec_opts_init(&e->opts, HANGAR_EXEC_OPTS_VERSION);
	e->doc = request_json(r, exec_fields);
	if (!e->doc)
		return -1;
	if (want_string(r, e->doc, "command", &e->command) < 0 || want_string(r, e->doc, "cwd", &cwd) < 0 ||
	    want_string(r, e->doc, "user", &user) < 0 || want_string(r, e->doc, "stdin", &in) < 0 ||
	    want_string(r, e->doc, "stdin_base64", &in64) < 0 || want_string(r, e->doc, "encoding", &enc) < 0 ||
	    want_int(r, e->doc, "timeout", 0, 604800, &timeout) < 0 ||
	    want_int(r, e->doc, "output_limit", 0, 4294967296.0, &limit) < 0)
		return -1;
	if (!e->command) {
		reply_error(r, 400, "invalid", HANGAR_EINVAL, "\"command\" is required");
		return -1;
	}
	if (enc && strcmp(enc, "base64") != 0 && strcmp(enc, "auto") != 0) {
		reply_error(r, 400, "invalid", HANGAR_EINVAL, "\"encoding\" is \"auto\" or \"base64\"");
		return -1;
	}
	e->force_b64 = enc && strcmp(enc, "base64") == 0;
	if (in && in64) {
		reply_error(r, 400, "invalid", HANGAR_EINVAL, "give \"stdin\" or \"stdin_base64\", not both");
		return -1;
	}
	if (in) {
		e->opts.stdin_data = in;
		e->opts.stdin_len = strlen(in);
	} else if (in64) {
		size_t n = strlen(in64), out_len;
		e->stdin_buf = malloc(n + 1);
		if (!e->stdin_buf || sodium_base642bin(e->stdin_buf, n + 1, in64, n, " \n", &out_len, NULL,
						       sodium_base64_VARIANT_ORIGINAL) != 0) {
			reply_error(r, 400, "invalid", HANGAR_EINVAL, "\"stdin_base64\" is not base64");
			return -1;
		}
		e->opts.stdin_data = e->stdin_buf;
		e->opts.stdin_len = out_len;
	}
	e->env = env_array(r, e->doc, "env", &failed);
	if (failed)
		return -1;
	e->opts.env = (const char *const *)e->env;
	e->opts.cwd = cwd;
	e->opts.user = user;
	e->opts.timeout_sec = timeout;
	e->opts.output_limit = (uint64_t)limit;
	e->opts.cancel = cancel_on_stop;
	return 0;
}

static void exec_req_free(struct exec_req *e)
{
	env_free(e->env);
	free(e->stdin_buf);
	cJSON_Delete(e->doc);
}

static void add_outcome(cJSON *o, const hangar_exec_result *res, uint64_t limit)
{
	sjson_add_int64(o, "exit_code", res->exit_code);
	cJSON_AddBoolToObject(o, "timed_out", res->timed_out);
	sjson_add_int64(o, "stdout_bytes", (int64_t)res->out_bytes);
	sjson_add_int64(o, "stderr_bytes", (int64_t)res->err_bytes);
	cJSON_AddBoolToObject(o, "stdout_truncated", res->out_bytes > limit);
	cJSON_AddBoolToObject(o, "stderr_truncated", res->err_bytes > limit);
	cJSON_AddNumberToObject(o, "duration_ms", (double)res->duration_us / 1000.0);
}

void h_exec(struct request *r)
{
	const char *stream = request_query(r, "stream");
	struct exec_req e;
	hangar_exec_result res = HANGAR_EXEC_RESULT_INIT;
	hangar_sandbox *sb = NULL;
	int rc;

	if (stream && strcmp(stream, "0") != 0 && strcmp(stream, "false") != 0) {
		h_exec_stream(r);
		return;
	}
	if (parse_exec(r, &e) < 0)
		goto out;
	sb = sandbox_open(r);
	if (!sb)
		goto out;
	/* A client that leaves before the answer stops the command (499 in the log). */
	e.opts.cancel = request_abandoned;
	e.opts.payload = r;
	rc = hangar_sandbox_exec(&res, sb, e.command, &e.opts);
	if (rc < 0) {
		reply_hangar_error(r, rc);
		goto out;
	}
	cJSON *o = cJSON_CreateObject();
	add_outcome(o, &res, e.opts.output_limit ? e.opts.output_limit : hangard->output_limit);
	add_bytes(o, "stdout", "stdout_encoding", res.out.ptr ? res.out.ptr : "", res.out.size, e.force_b64);
	add_bytes(o, "stderr", "stderr_encoding", res.err.ptr ? res.err.ptr : "", res.err.size, e.force_b64);
	reply_json(r, 200, o);
out:
	hangar_exec_result_dispose(&res);
	hangar_sandbox_unref(sb);
	exec_req_free(&e);
}

/* ---- streaming ---- */

struct live {
	struct stream *s;
	int force_b64;
};

static void emit(struct stream *s, cJSON *ev)
{
	char *text = cJSON_PrintUnformatted(ev);
	cJSON_Delete(ev);
	if (!text)
		return;
	size_t n = strlen(text);
	text[n] = '\n'; /* replaces the terminator; the length says where it ends */
	stream_write(s, text, n + 1);
	free(text);
}

static void on_output(int which, const char *data, size_t len, void *payload)
{
	struct live *l = payload;
	cJSON *ev = cJSON_CreateObject();
	cJSON_AddStringToObject(ev, "type", which == HANGAR_STREAM_STDERR ? "stderr" : "stdout");
	add_bytes(ev, "data", "encoding", data, len, l->force_b64);
	emit(l->s, ev);
}

static int cancel_stream(void *payload)
{
	struct live *l = payload;
	/* The client went away or stopped reading: stop the command too. */
	return stream_is_closed(l->s) || hangard->stopping == 2;
}

void h_exec_stream(struct request *r)
{
	struct exec_req e;
	hangar_exec_result res = HANGAR_EXEC_RESULT_INIT;
	hangar_sandbox *sb = NULL;
	struct live l = { 0 };
	struct MHD_Response *resp;
	uint64_t limit;
	int rc;

	if (parse_exec(r, &e) < 0)
		goto out;
	sb = sandbox_open(r);
	if (!sb)
		goto out;
	/* Output not read within the bound ends the stream and the command. */
	limit = e.opts.output_limit ? e.opts.output_limit : hangard->output_limit;
	l.s = stream_new((size_t)(4 * limit + 65536));
	l.force_b64 = e.force_b64;
	if (!l.s) {
		reply_error(r, 500, "nomem", HANGAR_ENOMEM, "out of memory");
		goto out;
	}
	stream_attach(l.s, request_connection(r));
	resp = stream_response(l.s, "application/x-ndjson");
	if (!resp) {
		reply_error(r, 500, "nomem", HANGAR_ENOMEM, "out of memory");
		goto out;
	}
	reply_stream_now(r, 200, resp);
	/* From here on the answer is the stream: r is no longer ours. */
	e.opts.on_output = on_output;
	e.opts.cancel = cancel_stream;
	e.opts.payload = &l;
	rc = hangar_sandbox_exec(&res, sb, e.command, &e.opts);
	cJSON *ev = cJSON_CreateObject();
	if (rc < 0) {
		const hangar_error *err = hangar_error_last();
		cJSON *eo;
		cJSON_AddStringToObject(ev, "type", "error");
		eo = cJSON_AddObjectToObject(ev, "error");
		cJSON_AddStringToObject(eo, "kind", hangar_error_name(rc));
		sjson_add_int64(eo, "code", rc);
		cJSON_AddStringToObject(eo, "message", err->code == rc ? err->message : hangar_strerror(rc));
	} else {
		cJSON_AddStringToObject(ev, "type", "exit");
		add_outcome(ev, &res, limit);
	}
	emit(l.s, ev);
	stream_close(l.s);
out:
	stream_unref(l.s);
	hangar_exec_result_dispose(&res);
	hangar_sandbox_unref(sb);
	exec_req_free(&e);
}
