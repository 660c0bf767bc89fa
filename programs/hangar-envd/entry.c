/*
 * EntryInfo, as upstream envd fills it: the description of one directory
 * entry that Stat, ListDir, MakeDir, Move and the watch events all return.
 */
#define _GNU_SOURCE
#include "entry.h"

#include <errno.h>
#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "creds.h"
#include "pjson.h"

/*
 * Go's FileMode.String(): one letter per type or special bit, in the order
 * of "dalTLDpSugct?" ('-' when there is none), then the nine rwx bits. Only
 * the letters a Linux stat can produce are reachable here.
 */
static void mode_string(mode_t m, char out[24])
{
	size_t w = 0;
	static const char rwx[] = "rwxrwxrwx";

	switch (m & S_IFMT) {
	case S_IFDIR:
		out[w++] = 'd';
		break;
	case S_IFLNK:
		out[w++] = 'L';
		break;
	case S_IFBLK:
		out[w++] = 'D';
		break;
	case S_IFCHR:
		out[w++] = 'D';
		break;
	case S_IFIFO:
		out[w++] = 'p';
		break;
	case S_IFSOCK:
		out[w++] = 'S';
		break;
	}
	if (m & S_ISUID)
		out[w++] = 'u';
	if (m & S_ISGID)
		out[w++] = 'g';
	if (S_ISCHR(m))
		out[w++] = 'c';
	if (m & S_ISVTX)
		out[w++] = 't';
	if (w == 0)
		out[w++] = '-';
	for (int i = 0; i < 9; i++)
		out[w++] = (m & (1u << (8 - i))) ? rwx[i] : '-';
	out[w] = '\0';
}

/* The user or group name for an id, or the id in decimal when unknown. */
static void id_name(int is_group, unsigned id, char *out, size_t outsz)
{
	size_t bufsz = 4096;

	for (int tries = 0; tries < 6; tries++, bufsz *= 4) {
		char *buf = malloc(bufsz);
		int rc, found = 0;

		if (!buf)
			break;
		if (is_group) {
			struct group gr, *res = NULL;

			rc = getgrgid_r((gid_t)id, &gr, buf, bufsz, &res);
			if (rc == 0 && res) {
				snprintf(out, outsz, "%s", res->gr_name);
				found = 1;
			}
		} else {
			struct passwd pw, *res = NULL;

			rc = getpwuid_r((uid_t)id, &pw, buf, bufsz, &res);
			if (rc == 0 && res) {
				snprintf(out, outsz, "%s", res->pw_name);
				found = 1;
			}
		}
		free(buf);
		if (found)
			return;
		/* Only a too-small buffer is worth another try. */
		if (rc != ERANGE)
			break;
	}
	snprintf(out, outsz, "%u", id);
}

/* Type and permission bits as upstream reports them: a symlink takes both
 * from its final target, and a dangling one has neither. */
static void entry_type(const char *path, const struct stat *lst, const char **type, unsigned *mode)
{
	struct stat st;
	const struct stat *eff = lst;

	*type = NULL;
	*mode = 0;
	if (S_ISLNK(lst->st_mode)) {
		if (stat(path, &st) < 0)
			return;
		eff = &st;
	}
	if (S_ISREG(eff->st_mode))
		*type = "FILE_TYPE_FILE";
	else if (S_ISDIR(eff->st_mode))
		*type = "FILE_TYPE_DIRECTORY";
	*mode = (unsigned)(eff->st_mode & 0777);
}

cJSON *envd_entry_from_stat(const char *path, const struct stat *lst)
{
	cJSON *e = cJSON_CreateObject();
	char name[NAME_MAX + 2], perms[24], owner[64], group[64], ts[40];
	const char *type;
	unsigned mode;
	cJSON *meta;

	if (!e)
		return NULL;
	envd_base_name(path, name, sizeof(name));
	entry_type(path, lst, &type, &mode);
	mode_string(lst->st_mode, perms);
	/* The sandbox's root owns what it made under root_id: named as the sandbox names it. */
	id_name(0, envd_inner_id((unsigned)lst->st_uid), owner, sizeof(owner));
	id_name(1, envd_inner_id((unsigned)lst->st_gid), group, sizeof(group));

	cJSON_AddStringToObject(e, "name", name);
	if (type)
		cJSON_AddStringToObject(e, "type", type);
	cJSON_AddStringToObject(e, "path", path);
	pjson_add_int64(e, "size", (int64_t)lst->st_size);
	if (mode)
		cJSON_AddNumberToObject(e, "mode", mode);
	cJSON_AddStringToObject(e, "permissions", perms);
	cJSON_AddStringToObject(e, "owner", owner);
	cJSON_AddStringToObject(e, "group", group);
	if (lst->st_mtim.tv_sec || lst->st_mtim.tv_nsec) {
		pjson_format_timestamp(ts, (int64_t)lst->st_mtim.tv_sec, lst->st_mtim.tv_nsec);
		cJSON_AddStringToObject(e, "modifiedTime", ts);
	}
	if (S_ISLNK(lst->st_mode)) {
		char *target = realpath(path, NULL);

		cJSON_AddStringToObject(e, "symlinkTarget", target ? target : path);
		free(target);
	}
	meta = envd_metadata_read(path);
	if (meta)
		cJSON_AddItemToObject(e, "metadata", meta);
	return e;
}

cJSON *envd_entry_info(const char *path, struct rpc_error *err)
{
	struct stat st;
	cJSON *e;

	if (lstat(path, &st) < 0) {
		if (errno == ENOENT)
			rpc_fail(err, CONNECT_NOT_FOUND, "file not found: lstat %s: %s", path, strerror(errno));
		else
			rpc_fail(err, envd_fs_code(errno), "error getting file info: lstat %s: %s", path,
				 strerror(errno));
		return NULL;
	}
	e = envd_entry_from_stat(path, &st);
	if (!e)
		rpc_fail(err, CONNECT_INTERNAL, "out of memory");
	return e;
}
