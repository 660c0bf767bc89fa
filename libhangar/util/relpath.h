/*
 * Relative path names as archives carry them (tar members, layer entries),
 * reduced to one canonical spelling before anything is looked up or made:
 * components joined by a single '/', no empty or "." component.
 */
#pragma once

#include <stddef.h>

/*
 * Writes name's canonical form into out ("./a//b/" -> "a/b"). Returns 0,
 * 1 when nothing is left (the top itself: "", ".", "./"), or -1 with *why
 * set to a static phrase when name is absolute, has a ".." component or
 * does not fit in size bytes. The caller bounds the name's length and
 * decides what an empty name means.
 */
int relpath_canon(const char *name, char *out, size_t size, const char **why);
