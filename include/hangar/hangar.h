/*
 * libhangar: sandboxes for untrusted code, on any provider, behind one API.
 * This umbrella header includes every public header but hangar/sys/.
 */
#ifndef HANGAR_H
#define HANGAR_H

#include "common.h"
#include "version.h"
#include "types.h"
#include "errors.h"
#include "buffer.h"
#include "context.h"
#include "provider.h"
#include "sandbox.h"
#include "process.h"
#include "template.h"
#include "tier.h"
#include "environment.h"
#include "checkpoint.h"
#include "session.h"
#include "image.h"

#endif
