/*
 * The query layer on PostgreSQL (libpq), for deployments where several
 * processes or machines share one store (HANGAR_STORE=postgresql://...).
 *
 * Statements go as PQexecParams with an unnamed statement, typed parameters
 * and text results: no server-side state outlives a call, so a connection
 * pooler in transaction mode sits safely in front, and a connection that
 * broke between calls is simply made again (once) before the call fails.
 * The URL's password never reaches a message: it is cut out of whatever
 * libpq says, and the database is named without it.
 */
#define _GNU_SOURCE
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "db-impl.h"

/* Type OIDs of the parameters we send (pg_type.dat). */
#define OID_BYTEA 17
#define OID_INT8 20
#define OID_TEXT 25

struct pg {
	struct db base;
	PGconn *conn;
	char *secret[2];          /* the password as written and as decoded, cut out of messages */
	char *where[5];           /* user, host, hostaddr, port and database: cut out of messages too */
};

struct pg_param {
	Oid type;
	char *value;              /* NULL: SQL NULL */
	int len, format;
};

struct pg_stmt {
	struct db_stmt base;
	char *sql;
	int nparams;
	struct pg_param p[DB_MAX_PARAMS];
	PGresult *res;
	int row;
	int64_t changes;
	unsigned char *blob;      /* the current row's last decoded bytea */
};

#define PG(db) ((struct pg *)(db))
#define PSTMT(s) ((struct pg_stmt *)(s))

/* Replaces every occurrence of each secret in s (of size n) with ********. */
static void scrub(char *s, size_t n, char *const secret[2])
{
	for (int k = 0; k < 2; k++) {
		size_t sl = secret[k] ? strlen(secret[k]) : 0;
		char *p;

		if (!sl)
			continue;
		while ((p = strstr(s, secret[k])) != NULL) {
			size_t tail = strlen(p + sl);

			if (sl >= 8) {
				memcpy(p, "********", 8);
				memmove(p + 8, p + sl, tail + 1);
			} else if ((size_t)(p - s) + 8 + tail < n) {
				memmove(p + 8, p + sl, tail + 1);
				memcpy(p, "********", 8);
			} else {
				memset(p, '*', sl);
			}
		}
	}
}

static int hexval(int c)
{
	return c >= '0' && c <= '9' ? c - '0' : (c | 32) >= 'a' && (c | 32) <= 'f' ? (c | 32) - 'a' + 10 : -1;
}

static char *decode_pct(const char *s, size_t n)
{
	char *out = malloc(n + 1), *o = out;

	if (!out)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		if (s[i] == '%' && i + 2 < n + 1 && hexval(s[i + 1]) >= 0 && hexval(s[i + 2]) >= 0) {
			*o++ = (char)(hexval(s[i + 1]) * 16 + hexval(s[i + 2]));
			i += 2;
		} else {
			*o++ = s[i];
		}
	}
	*o = '\0';
	return out;
}

/*
 * The password of url, found without libpq (whose parser may be what
 * failed): the userinfo's after its first colon, or a password= parameter.
 */
static void find_secret(const char *url, char *secret[2])
{
	const char *auth = strstr(url, "://"), *end, *at = NULL, *colon, *q;

	secret[0] = secret[1] = NULL;
	if (!auth)
		return;
	auth += 3;
	end = auth + strcspn(auth, "/?");
	for (const char *p = auth; p < end; p++)
		if (*p == '@')
			at = p;
	if (at && (colon = memchr(auth, ':', (size_t)(at - auth))) != NULL && at > colon + 1) {
		secret[0] = strndup(colon + 1, (size_t)(at - colon - 1));
		secret[1] = decode_pct(colon + 1, (size_t)(at - colon - 1));
		return;
	}
	for (q = strchr(end, '?'); q; q = strchr(q + 1, '&')) {
		if (!strncmp(q + 1, "password=", 9)) {
			size_t n = strcspn(q + 10, "&");

			secret[0] = strndup(q + 10, n);
			secret[1] = decode_pct(q + 10, n);
			return;
		}
	}
}

static void free_secret(char *secret[2])
{
	for (int k = 0; k < 2; k++)
		if (secret[k]) {
			explicit_bzero(secret[k], strlen(secret[k]));
			free(secret[k]);
			secret[k] = NULL;
		}
}

/*
 * libpq names where it tried ("connection to server at \"db.internal\"
 * (10.1.2.3), port 5432 failed: ...", "on socket \"/run/pg/.s.PGSQL.5432\"")
 * before why. Only the why is kept, and in it every quoted name (the user,
 * the database) is replaced: a message says what went wrong, never where
 * the store is or who signs in to it.
 */
static void keep_the_reason(char *s)
{
	char *why, *q, *end;

	if (!strncmp(s, "connection to server", 20) && (why = strstr(s, "failed: ")) != NULL)
		memmove(s, why + 8, strlen(why + 8) + 1);
	for (q = strchr(s, '"'); q && (end = strchr(q + 1, '"')) != NULL; q = strchr(q + 1, '"')) {
		if (end > q + 1) {
			memmove(q + 2, end, strlen(end) + 1);
			q[1] = '*';
			end = q + 2;
		}
		q = end;
	}
}

/* Sets the thread's error from a libpq message, one line, without the password or where the store is. */
static int pg_message(struct pg *pg, int code, int category, const char *what, const char *msg, int connecting)
{
	char buf[700];

	snprintf(buf, sizeof(buf), "%s", msg && *msg ? msg : "no details");
	db_one_line(buf);
	scrub(buf, sizeof(buf), pg->secret);
	if (connecting)
		keep_the_reason(buf);
	/* Short values (a user "pg") would cut ordinary words apart: those go by their quotes above. */
	for (int k = 0; k < 5; k++)
		if (pg->where[k] && strlen(pg->where[k]) >= 4) {
			char *one[2] = { pg->where[k], NULL };

			scrub(buf, sizeof(buf), one);
		}
	return herr(code, category, "state store %s: %s: %s", pg->base.name, what, buf);
}

static int pg_err(struct pg *pg, int code, int category, const char *what, const char *msg)
{
	return pg_message(pg, code, category, what, msg, 0);
}

int db_url_is_postgres(const char *url)
{
	return url && (!strncmp(url, "postgresql://", 13) || !strncmp(url, "postgres://", 11));
}

/* Keeps the parts of the parsed options that say where the store is, to cut them out of messages. */
static void remember_where(struct pg *pg, PQconninfoOption *opts)
{
	static const char *const keys[5] = { "user", "host", "hostaddr", "port", "dbname" };

	for (PQconninfoOption *o = opts; o && o->keyword; o++)
		for (int k = 0; k < 5; k++)
			if (o->val && *o->val && !strcmp(o->keyword, keys[k]) && !pg->where[k])
				pg->where[k] = strdup(o->val);
}

/* "5432" or, for several hosts, "5432,5433": numbers libpq would otherwise refuse only when connecting. */
static int valid_ports(const char *v)
{
	for (;;) {
		size_t n = strspn(v, "0123456789");
		long port = n && n <= 5 ? strtol(v, NULL, 10) : 0;

		if (port < 1 || port > 65535)
			return 0;
		v += n;
		if (!*v)
			return 1;
		if (*v++ != ',')
			return 0;
	}
}

int db_check_store_url(const char *setting, const char *value)
{
	PQconninfoOption *opts;
	char *err = NULL, *secret[2];
	const char *why;
	struct pg tmp = { 0 };
	int rc = 0;

	if (!*value)
		return 0;
	if (!db_url_is_postgres(value))
		return herr(HANGAR_ECONFIG, HANGAR_ERRCAT_CONFIG,
			    "%s must be empty (SQLite in the state directory) or a postgresql:// URL", setting);
	if (!pq_loaded(&why))
		return herr(HANGAR_EOS, HANGAR_ERRCAT_OS, "%s names PostgreSQL, but %s", setting, why);
	find_secret(value, secret);
	opts = PQconninfoParse(value, &err);
	for (PQconninfoOption *o = opts; o && o->keyword && !rc; o++)
		if (!strcmp(o->keyword, "port") && o->val && !valid_ports(o->val))
			rc = herr(HANGAR_ECONFIG, HANGAR_ERRCAT_CONFIG, "%s: the port must be a number from 1 to 65535",
				  setting);
	if (!opts) {
		tmp.secret[0] = secret[0];
		tmp.secret[1] = secret[1];
		snprintf(tmp.base.name, sizeof(tmp.base.name), "(%s)", setting);
		rc = pg_err(&tmp, HANGAR_ECONFIG, HANGAR_ERRCAT_CONFIG, "not a usable PostgreSQL URL",
			    err ? err : "out of memory");
		herr_recode(HANGAR_ECONFIG);
	}
	PQfreemem(err);
	PQconninfoFree(opts);
	free_secret(secret);
	return rc;
}

/* The library never prints: the server's notices ("already exists, skipping") go nowhere. */
static void quiet(void *arg, const char *message)
{
	(void)arg;
	(void)message;
}

/* A connection that failed to open: unreachable, or refused us. */
static int connect_failed(struct pg *pg, const char *what)
{
	/* Asked for a password: the server was reached and refused the credentials. */
	int reached = PQconnectionNeedsPassword(pg->conn) || PQconnectionUsedPassword(pg->conn);
	int rc = pg_message(pg, HANGAR_EUNAVAILABLE, HANGAR_ERRCAT_NET, what, PQerrorMessage(pg->conn), 1);

	if (!reached)
		herr_flags(HANGAR_ERROR_UNREACHABLE);
	return rc;
}

int db_open_postgres(struct db **out, const char *url)
{
	/*
	 * Defaults before dbname: what the URL says overrides them. Every wait
	 * has a deadline: connecting, and (over TCP) a server that went silent
	 * is given up on after about a minute rather than the system's hours.
	 */
	const char *keys[] = { "connect_timeout", "application_name", "keepalives_idle", "keepalives_interval",
			       "keepalives_count", "tcp_user_timeout", "dbname", NULL };
	const char *vals[] = { "10", "hangar", "30", "10", "3", "60000", url, NULL };
	PQconninfoOption *opts;
	char *err = NULL;
	struct pg *pg;
	int rc;

	*out = NULL;
	if ((rc = db_check_store_url("HANGAR_STORE", url)) != 0)
		return rc;
	pg = calloc(1, sizeof(*pg));
	if (!pg)
		return herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
	/* Messages call it by its kind alone: the URL's host, port and database stay out. */
	db_init(&pg->base, &db_postgres_ops, "postgresql");
	opts = PQconninfoParse(url, &err);
	remember_where(pg, opts);
	PQfreemem(err);
	PQconninfoFree(opts);
	find_secret(url, pg->secret);
	pg->conn = PQconnectdbParams(keys, vals, 1);
	if (!pg->conn) {
		db_close(&pg->base);
		return herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
	}
	if (PQstatus(pg->conn) != CONNECTION_OK) {
		rc = connect_failed(pg, "cannot connect");
		db_close(&pg->base);
		return rc;
	}
	PQsetNoticeProcessor(pg->conn, quiet, NULL);
	*out = &pg->base;
	return 0;
}

static void pg_close(struct db *db)
{
	PQfinish(PG(db)->conn);
	free_secret(PG(db)->secret);
	for (int k = 0; k < 5; k++)
		free(PG(db)->where[k]);
	db_fini(db);
	free(db);
}

/* The error of a failed statement, mapped to a kind by its SQLSTATE. */
static void result_error(struct pg *pg, PGresult *res)
{
	const char *state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
	const char *msg = res ? PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY) : NULL;
	int code = HANGAR_EOS, cat = HANGAR_ERRCAT_OS;

	/* No SQLSTATE: libpq's own failure, not the server's answer (the connection). */
	if (PQstatus(pg->conn) != CONNECTION_OK || !state || !strncmp(state, "08", 2) || /* connection */
	    (state && (!strcmp(state, "57P01") || !strcmp(state, "57P03"))))             /* shutting down */
		code = HANGAR_EUNAVAILABLE, cat = HANGAR_ERRCAT_NET;
	else if (state && !strcmp(state, "23505")) /* unique_violation */
		code = HANGAR_EEXISTS, cat = HANGAR_ERRCAT_ARGUMENT;
	/* A value the caller gave that the server refuses for what it is (a
	 * data exception: bytes its encoding refuses, a number out of range) or
	 * its size (a row too large to index): the caller's to fix. A broken
	 * constraint other than uniqueness is the library's own mistake. */
	else if (state && (!strncmp(state, "22", 2) || !strcmp(state, "54000")))
		code = HANGAR_EINVAL, cat = HANGAR_ERRCAT_ARGUMENT;
	else if (state && (!strcmp(state, "57014") || !strcmp(state, "55P03"))) /* canceled, lock_not_available */
		code = HANGAR_ETIMEOUT;
	/* Without the server's own message it is libpq's, which may say where it connects. */
	pg_message(pg, code, cat, "query", msg ? msg : PQerrorMessage(pg->conn), !msg);
}

/*
 * Runs sql (params NULL: the simple protocol, which takes several
 * statements). A connection found broken is made again once, outside a
 * transaction; inside one, what the transaction did is lost: it fails.
 * NULL result: the error is set.
 */
static PGresult *run(struct pg *pg, const char *sql, int nparams, const struct pg_param *p)
{
	Oid types[DB_MAX_PARAMS];
	const char *values[DB_MAX_PARAMS];
	int lens[DB_MAX_PARAMS], formats[DB_MAX_PARAMS];

	for (int i = 0; p && i < nparams; i++) {
		types[i] = p[i].type;
		values[i] = p[i].value;
		lens[i] = p[i].len;
		formats[i] = p[i].format;
	}
	for (int reset = 0, broken = 0;;) {
		PGresult *res;
		ExecStatusType s;

		if (broken || PQstatus(pg->conn) != CONNECTION_OK) {
			if (pg->base.in_tx || reset) {
				pg_message(pg, HANGAR_EUNAVAILABLE, HANGAR_ERRCAT_NET, "the connection broke",
					   PQerrorMessage(pg->conn), 1);
				return NULL;
			}
			reset = 1;
			PQreset(pg->conn);
			if (PQstatus(pg->conn) != CONNECTION_OK) {
				connect_failed(pg, "cannot connect again");
				return NULL;
			}
			PQsetNoticeProcessor(pg->conn, quiet, NULL);
		}
		if (p)
			res = PQexecParams(pg->conn, sql, nparams, nparams ? types : NULL, nparams ? values : NULL,
					   nparams ? lens : NULL, nparams ? formats : NULL, 0);
		else
			res = PQexec(pg->conn, sql);
		s = res ? PQresultStatus(res) : PGRES_FATAL_ERROR;
		if (s == PGRES_COMMAND_OK || s == PGRES_TUPLES_OK)
			return res;
		/*
		 * A server that went away under an idle connection (stopped, crashed)
		 * can leave libpq reporting CONNECTION_OK with a failure of its own,
		 * one without SQLSTATE: that is a broken connection too.
		 */
		broken = PQstatus(pg->conn) != CONNECTION_OK || !res || !PQresultErrorField(res, PG_DIAG_SQLSTATE);
		if (!broken || pg->base.in_tx || reset) {
			result_error(pg, res);
			PQclear(res);
			return NULL;
		}
		PQclear(res); /* the connection broke under the statement: once more on a new one */
	}
}

static int pg_exec(struct db *db, const char *sql)
{
	PGresult *res = run(PG(db), sql, 0, NULL);

	PQclear(res);
	return res ? 0 : hangar_error_last()->code;
}

/* The highest $N of sql outside quotes (0: none). */
static int count_params(const char *sql)
{
	char quote = 0;
	int max = 0;

	for (const char *p = sql; *p; p++) {
		if (quote) {
			if (*p == quote)
				quote = 0;
		} else if (*p == '\'' || *p == '"') {
			quote = *p;
		} else if (*p == '$' && p[1] >= '1' && p[1] <= '9') {
			int n = (int)strtol(p + 1, NULL, 10);

			if (n > max)
				max = n;
		}
	}
	return max;
}

static int pg_prepare(struct db *db, struct db_stmt **out, const char *sql)
{
	struct pg_stmt *s;
	int n = count_params(sql);

	if (n > DB_MAX_PARAMS)
		return herr(HANGAR_EINVAL, HANGAR_ERRCAT_ARGUMENT, "state store: more than %d parameters",
			    DB_MAX_PARAMS);
	s = calloc(1, sizeof(*s));
	if (!s || !(s->sql = strdup(sql))) {
		free(s);
		return herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
	}
	s->nparams = n;
	s->base.db = db;
	*out = &s->base;
	return 0;
}

static int pg_bind(struct db_stmt *st, int i, int type, const char *text, int64_t num, const void *blob, size_t len)
{
	struct pg_stmt *s = PSTMT(st);
	struct pg_param *p;
	char buf[32];

	if (i > s->nparams)
		return herr(HANGAR_EINVAL, HANGAR_ERRCAT_ARGUMENT, "state store: the statement has no parameter $%d", i);
	p = &s->p[i - 1];
	free(p->value);
	memset(p, 0, sizeof(*p));
	if (type == 'i') {
		snprintf(buf, sizeof(buf), "%lld", (long long)num);
		p->type = OID_INT8;
		p->value = strdup(buf);
	} else if (type == 'b') {
		if (len > (size_t)1 << 30)
			return herr(HANGAR_ETOOLARGE, HANGAR_ERRCAT_ARGUMENT, "state store: a value over 1 GiB");
		p->type = OID_BYTEA;
		p->format = 1;
		p->len = (int)len;
		p->value = malloc(len ? len : 1);
		if (p->value && len)
			memcpy(p->value, blob, len);
	} else {
		p->type = OID_TEXT;
		if (!text)
			return 0;
		p->value = strdup(text);
	}
	return p->value ? 0 : herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
}

static void drop_result(struct pg_stmt *s)
{
	PQclear(s->res);
	s->res = NULL;
	PQfreemem(s->blob);
	s->blob = NULL;
}

static int pg_step(struct db_stmt *st)
{
	struct pg_stmt *s = PSTMT(st);

	PQfreemem(s->blob);
	s->blob = NULL;
	if (!s->res) {
		const char *n;

		s->res = run(PG(st->db), s->sql, s->nparams, s->p);
		if (!s->res)
			return hangar_error_last()->code;
		n = PQcmdTuples(s->res);
		s->changes = n && *n ? strtoll(n, NULL, 10) : 0;
		s->row = 0;
	} else {
		s->row++;
	}
	return s->row < PQntuples(s->res) ? DB_ROW : DB_DONE;
}

static const char *pg_column_text(struct db_stmt *st, int i)
{
	struct pg_stmt *s = PSTMT(st);

	if (!s->res || s->row >= PQntuples(s->res) || i >= PQnfields(s->res) || PQgetisnull(s->res, s->row, i))
		return NULL;
	return PQgetvalue(s->res, s->row, i);
}

static int64_t pg_column_int64(struct db_stmt *st, int i)
{
	const char *v = pg_column_text(st, i);

	if (!v)
		return 0;
	if (!strcmp(v, "t") || !strcmp(v, "f")) /* boolean */
		return *v == 't';
	return strtoll(v, NULL, 10);
}

static const void *pg_column_blob(struct db_stmt *st, int i, size_t *len)
{
	struct pg_stmt *s = PSTMT(st);
	const char *v = pg_column_text(st, i);

	*len = 0;
	if (!v)
		return NULL;
	if (PQftype(s->res, i) != OID_BYTEA) {
		*len = strlen(v);
		return v;
	}
	PQfreemem(s->blob);
	s->blob = PQunescapeBytea((const unsigned char *)v, len);
	return s->blob;
}

static int64_t pg_changes(struct db_stmt *st)
{
	return PSTMT(st)->changes;
}

static void pg_reset(struct db_stmt *st)
{
	drop_result(PSTMT(st));
}

static void pg_finalize(struct db_stmt *st)
{
	struct pg_stmt *s = PSTMT(st);

	drop_result(s);
	for (int i = 0; i < DB_MAX_PARAMS; i++)
		free(s->p[i].value);
	free(s->sql);
	free(s);
}

/*
 * The version's table. Two processes creating it at once can collide in
 * the catalogue (IF NOT EXISTS checks before it inserts: the loser gets
 * "type already exists" or a unique violation): once more, the loser
 * finds the table made and goes on.
 */
static int pg_migrate_setup(struct db *db)
{
	const char *sql = "CREATE TABLE IF NOT EXISTS schema_version (version BIGINT NOT NULL)";

	return pg_exec(db, sql) == 0 ? 0 : pg_exec(db, sql);
}

/* Every migrator waits here for the one before it to commit. */
static int pg_migrate_lock(struct db *db)
{
	return pg_exec(db, "LOCK TABLE schema_version IN SHARE ROW EXCLUSIVE MODE");
}

static int pg_version_get(struct db *db)
{
	PGresult *res;
	int v = 0;

	/* A database never migrated has no table: version 0, not an error. */
	res = run(PG(db), "SELECT to_regclass('schema_version') IS NOT NULL", 0, NULL);
	if (!res)
		return hangar_error_last()->code;
	if (PQntuples(res) == 1 && !strcmp(PQgetvalue(res, 0, 0), "t")) {
		PQclear(res);
		res = run(PG(db), "SELECT coalesce(max(version), 0) FROM schema_version", 0, NULL);
		if (!res)
			return hangar_error_last()->code;
		v = PQntuples(res) == 1 ? atoi(PQgetvalue(res, 0, 0)) : 0;
	}
	PQclear(res);
	return v;
}

static int pg_version_set(struct db *db, int v)
{
	char sql[96];
	int rc = pg_exec(db, "DELETE FROM schema_version");

	snprintf(sql, sizeof(sql), "INSERT INTO schema_version (version) VALUES (%d)", v);
	return rc ? rc : pg_exec(db, sql);
}

const struct db_ops db_postgres_ops = {
	.engine = DB_POSTGRES,
	.close = pg_close,
	.exec = pg_exec,
	.prepare = pg_prepare,
	.bind = pg_bind,
	.step = pg_step,
	.column_text = pg_column_text,
	.column_int64 = pg_column_int64,
	.column_blob = pg_column_blob,
	.changes = pg_changes,
	.reset = pg_reset,
	.finalize = pg_finalize,
	.migrate_setup = pg_migrate_setup,
	.migrate_lock = pg_migrate_lock,
	.version_get = pg_version_get,
	.version_set = pg_version_set,
	.begin_sql = "BEGIN",
};
