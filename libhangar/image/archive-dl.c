/*
 * libarchive, loaded the first time an image layer or archive is read
 * (util/dl.h says why): each function the image store uses, defined here
 * under libarchive's own name, loads the library and forwards. The readers
 * call img_archive_load() before the first of them, so that a missing
 * library is reported as one, by name; the answers below for an unloaded
 * library are only what libarchive gives for a reader it cannot make.
 */
#include <archive.h>
#include <archive_entry.h>
#include <stddef.h>

#include "image/img.h"
#include "util/dl.h"

#define ARCHIVE_FUNCTIONS(X)                                                                                   \
	X(archive_read_new) X(archive_read_free) X(archive_read_support_format_tar)                             \
	X(archive_read_support_filter_none) X(archive_read_support_filter_gzip)                                 \
	X(archive_read_support_filter_zstd) X(archive_read_open) X(archive_read_open_fd)                        \
	X(archive_read_next_header) X(archive_read_data_block) X(archive_error_string)                          \
	X(archive_entry_pathname) X(archive_entry_filetype) X(archive_entry_mode) X(archive_entry_uid)          \
	X(archive_entry_gid) X(archive_entry_mtime) X(archive_entry_mtime_nsec) X(archive_entry_hardlink)       \
	X(archive_entry_symlink) X(archive_entry_sparse_count)

DL_LIBRARY(archive_lib, "libarchive.so.13", ARCHIVE_FUNCTIONS);

int img_archive_load(void)
{
	if (dl_load(&archive_lib) == 0)
		return 0;
	return herr(HANGAR_EOS, HANGAR_ERRCAT_OS, "%s (libhangar loads libarchive to read images)",
		    dl_why(&archive_lib));
}

#define LOADED() (dl_load(&archive_lib) == 0)

struct archive *archive_read_new(void)
{
	return LOADED() ? fn.archive_read_new() : NULL;
}

/* The calls below take a reader only a loaded libarchive made: it is loaded, or there is nothing to do. */
int archive_read_free(struct archive *a)
{
	return a && LOADED() ? fn.archive_read_free(a) : ARCHIVE_OK;
}

int archive_read_support_format_tar(struct archive *a)
{
	return LOADED() ? fn.archive_read_support_format_tar(a) : ARCHIVE_FATAL;
}

int archive_read_support_filter_none(struct archive *a)
{
	return LOADED() ? fn.archive_read_support_filter_none(a) : ARCHIVE_FATAL;
}

int archive_read_support_filter_gzip(struct archive *a)
{
	return LOADED() ? fn.archive_read_support_filter_gzip(a) : ARCHIVE_FATAL;
}

int archive_read_support_filter_zstd(struct archive *a)
{
	return LOADED() ? fn.archive_read_support_filter_zstd(a) : ARCHIVE_FATAL;
}

int archive_read_open(struct archive *a, void *data, archive_open_callback *open_cb, archive_read_callback *read_cb,
		      archive_close_callback *close_cb)
{
	return LOADED() ? fn.archive_read_open(a, data, open_cb, read_cb, close_cb) : ARCHIVE_FATAL;
}

int archive_read_open_fd(struct archive *a, int fd, size_t block_size)
{
	return LOADED() ? fn.archive_read_open_fd(a, fd, block_size) : ARCHIVE_FATAL;
}

int archive_read_next_header(struct archive *a, struct archive_entry **e)
{
	return LOADED() ? fn.archive_read_next_header(a, e) : ARCHIVE_FATAL;
}

int archive_read_data_block(struct archive *a, const void **buf, size_t *size, la_int64_t *offset)
{
	return LOADED() ? fn.archive_read_data_block(a, buf, size, offset) : ARCHIVE_FATAL;
}

const char *archive_error_string(struct archive *a)
{
	return LOADED() ? fn.archive_error_string(a) : dl_why(&archive_lib);
}

const char *archive_entry_pathname(struct archive_entry *e)
{
	return LOADED() ? fn.archive_entry_pathname(e) : NULL;
}

__LA_MODE_T archive_entry_filetype(struct archive_entry *e)
{
	return LOADED() ? fn.archive_entry_filetype(e) : 0;
}

__LA_MODE_T archive_entry_mode(struct archive_entry *e)
{
	return LOADED() ? fn.archive_entry_mode(e) : 0;
}

la_int64_t archive_entry_uid(struct archive_entry *e)
{
	return LOADED() ? fn.archive_entry_uid(e) : 0;
}

la_int64_t archive_entry_gid(struct archive_entry *e)
{
	return LOADED() ? fn.archive_entry_gid(e) : 0;
}

time_t archive_entry_mtime(struct archive_entry *e)
{
	return LOADED() ? fn.archive_entry_mtime(e) : 0;
}

long archive_entry_mtime_nsec(struct archive_entry *e)
{
	return LOADED() ? fn.archive_entry_mtime_nsec(e) : 0;
}

const char *archive_entry_hardlink(struct archive_entry *e)
{
	return LOADED() ? fn.archive_entry_hardlink(e) : NULL;
}

const char *archive_entry_symlink(struct archive_entry *e)
{
	return LOADED() ? fn.archive_entry_symlink(e) : NULL;
}

int archive_entry_sparse_count(struct archive_entry *e)
{
	return LOADED() ? fn.archive_entry_sparse_count(e) : 0;
}
