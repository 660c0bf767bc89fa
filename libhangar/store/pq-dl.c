/*
 * libpq, loaded the first time the store meets a postgresql:// URL
 * (util/dl.h says why): each function db-postgres.c uses, defined here under
 * libpq's own name, loads the library and forwards. db-postgres.c calls
 * pq_loaded() before the first of them, so that a missing library is
 * reported as one, by name; the answers below for an unloaded library are
 * only what libpq gives when it cannot make a connection or a result.
 */
#include <libpq-fe.h>
#include <stddef.h>

#include "db-impl.h"
#include "util/dl.h"

#define PQ_FUNCTIONS(X)                                                                                        \
	X(PQconnectdbParams) X(PQconninfoParse) X(PQconninfoFree) X(PQconnectionNeedsPassword)                 \
	X(PQconnectionUsedPassword) X(PQstatus) X(PQerrorMessage) X(PQsetNoticeProcessor) X(PQreset)          \
	X(PQfinish) X(PQexec) X(PQexecParams) X(PQresultStatus) X(PQresultErrorField) X(PQntuples)            \
	X(PQnfields) X(PQftype) X(PQgetvalue) X(PQgetisnull) X(PQcmdTuples) X(PQclear) X(PQfreemem)           \
	X(PQunescapeBytea)

DL_LIBRARY(pq_lib, "libpq.so.5", PQ_FUNCTIONS);

int pq_loaded(const char **why)
{
	if (dl_load(&pq_lib) == 0)
		return 1;
	*why = dl_why(&pq_lib);
	return 0;
}

#define LOADED() (dl_load(&pq_lib) == 0)

PGconn *PQconnectdbParams(const char *const *keywords, const char *const *values, int expand_dbname)
{
	return LOADED() ? fn.PQconnectdbParams(keywords, values, expand_dbname) : NULL;
}

PQconninfoOption *PQconninfoParse(const char *conninfo, char **errmsg)
{
	if (LOADED())
		return fn.PQconninfoParse(conninfo, errmsg);
	if (errmsg)
		*errmsg = NULL;
	return NULL;
}

/* The calls below take what only a loaded libpq made: it is loaded, or there is nothing to do. */
void PQconninfoFree(PQconninfoOption *options)
{
	if (options && LOADED())
		fn.PQconninfoFree(options);
}

int PQconnectionNeedsPassword(const PGconn *conn)
{
	return LOADED() ? fn.PQconnectionNeedsPassword(conn) : 0;
}

int PQconnectionUsedPassword(const PGconn *conn)
{
	return LOADED() ? fn.PQconnectionUsedPassword(conn) : 0;
}

ConnStatusType PQstatus(const PGconn *conn)
{
	return LOADED() ? fn.PQstatus(conn) : CONNECTION_BAD;
}

char *PQerrorMessage(const PGconn *conn)
{
	return LOADED() ? fn.PQerrorMessage(conn) : (char *)dl_why(&pq_lib);
}

PQnoticeProcessor PQsetNoticeProcessor(PGconn *conn, PQnoticeProcessor proc, void *arg)
{
	return LOADED() ? fn.PQsetNoticeProcessor(conn, proc, arg) : NULL;
}

void PQreset(PGconn *conn)
{
	if (LOADED())
		fn.PQreset(conn);
}

void PQfinish(PGconn *conn)
{
	if (conn && LOADED())
		fn.PQfinish(conn);
}

PGresult *PQexec(PGconn *conn, const char *query)
{
	return LOADED() ? fn.PQexec(conn, query) : NULL;
}

PGresult *PQexecParams(PGconn *conn, const char *command, int n, const Oid *types, const char *const *values,
		       const int *lengths, const int *formats, int result_format)
{
	return LOADED() ? fn.PQexecParams(conn, command, n, types, values, lengths, formats, result_format) : NULL;
}

ExecStatusType PQresultStatus(const PGresult *res)
{
	return LOADED() ? fn.PQresultStatus(res) : PGRES_FATAL_ERROR;
}

char *PQresultErrorField(const PGresult *res, int field)
{
	return LOADED() ? fn.PQresultErrorField(res, field) : NULL;
}

int PQntuples(const PGresult *res)
{
	return LOADED() ? fn.PQntuples(res) : 0;
}

int PQnfields(const PGresult *res)
{
	return LOADED() ? fn.PQnfields(res) : 0;
}

Oid PQftype(const PGresult *res, int field)
{
	return LOADED() ? fn.PQftype(res, field) : InvalidOid;
}

char *PQgetvalue(const PGresult *res, int row, int field)
{
	return LOADED() ? fn.PQgetvalue(res, row, field) : NULL;
}

int PQgetisnull(const PGresult *res, int row, int field)
{
	return LOADED() ? fn.PQgetisnull(res, row, field) : 1;
}

char *PQcmdTuples(PGresult *res)
{
	return LOADED() ? fn.PQcmdTuples(res) : (char *)"";
}

void PQclear(PGresult *res)
{
	if (res && LOADED())
		fn.PQclear(res);
}

void PQfreemem(void *p)
{
	if (p && LOADED())
		fn.PQfreemem(p);
}

unsigned char *PQunescapeBytea(const unsigned char *text, size_t *len)
{
	return LOADED() ? fn.PQunescapeBytea(text, len) : NULL;
}
