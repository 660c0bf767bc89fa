#include <string.h>

#include "relpath.h"

int relpath_canon(const char *name, char *out, size_t size, const char **why)
{
	size_t o = 0;
	const char *p = name;

	if (!size) {
		*why = "its name is too long";
		return -1;
	}
	if (name[0] == '/') {
		*why = "its path is absolute";
		return -1;
	}
	while (*p) {
		size_t n = strcspn(p, "/");

		if (n == 2 && p[0] == '.' && p[1] == '.') {
			*why = "its path has a .. component";
			return -1;
		}
		if (n && !(n == 1 && p[0] == '.')) {
			if (o + (o ? 1 : 0) + n + 1 > size) {
				*why = "its name is too long";
				return -1;
			}
			if (o)
				out[o++] = '/';
			memcpy(out + o, p, n);
			o += n;
		}
		p += n;
		if (*p == '/')
			p++;
	}
	out[o] = '\0';
	return o == 0 ? 1 : 0;
}
