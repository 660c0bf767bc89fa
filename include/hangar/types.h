/*
 * libhangar: forward declarations of every opaque handle.
 */
#ifndef HANGAR_TYPES_H
#define HANGAR_TYPES_H

#include "common.h"

/** A library context: settings, providers, log callback. */
typedef struct hangar_ctx hangar_ctx;
/** A sandbox provider (a flavour of backend: "local", ...). */
typedef struct hangar_provider hangar_provider;
/** A sandbox, running or paused, on some provider. */
typedef struct hangar_sandbox hangar_sandbox;
/** A background process or terminal inside a sandbox. */
typedef struct hangar_process hangar_process;

#endif
