/*
 * libhangar: common definitions shared by every public header.
 */
#ifndef HANGAR_COMMON_H
#define HANGAR_COMMON_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
#define HANGAR_BEGIN_DECL extern "C" {
#define HANGAR_END_DECL }
#else
#define HANGAR_BEGIN_DECL
#define HANGAR_END_DECL
#endif

#if defined(__GNUC__) || defined(__clang__)
#define HANGAR_EXTERN(type) extern __attribute__((visibility("default"))) type
#define HANGAR_WARN_UNUSED __attribute__((warn_unused_result))
#define HANGAR_DEPRECATED __attribute__((deprecated))
#else
#define HANGAR_EXTERN(type) extern type
#define HANGAR_WARN_UNUSED
#define HANGAR_DEPRECATED
#endif

/** Fill in the version and size fields of a caller-filled option struct. */
#define HANGAR_STRUCT_INIT(type, ver) { (ver), (uint32_t)sizeof(type) }

#endif
