/*
 * The size of every version of every public versioned struct, in one place.
 *
 * When a struct gains fields, its header's *_VERSION goes up and its table
 * here gains the new size: the offset of the first appended field closes the
 * old version. The static assertions make a version bump without a new size
 * fail to build.
 */
#include <assert.h>
#include <stddef.h>

#include "internal.h"
#include "versioned.h"

#define HV_COUNT(a) ((uint32_t)(sizeof(a) / sizeof((a)[0])))

#define HV_TABLE(name, what, VERSION, ...)                                                         \
	static const uint32_t name##_size[] = { __VA_ARGS__ };                                     \
	static_assert(HV_COUNT(name##_size) == VERSION, #VERSION " has no size in core/versions.c"); \
	const struct hversions name = { what, VERSION, name##_size }

/* Today's size of a struct, as the newest entry of its table. */
#define HV_NOW(type) ((uint32_t)sizeof(type))
/* The size of the version that ended before field (the first one appended after it). */
#define HV_UPTO(type, field) ((uint32_t)offsetof(type, field))

/* ---- options: read by the library ---------------------------------------- */

HV_TABLE(hv_create_opts, "create options", HANGAR_CREATE_OPTS_VERSION,
	 HV_UPTO(hangar_create_opts, environment), HV_NOW(hangar_create_opts));
HV_TABLE(hv_exec_opts, "exec options", HANGAR_EXEC_OPTS_VERSION, HV_NOW(hangar_exec_opts));
HV_TABLE(hv_process_opts, "process options", HANGAR_PROCESS_OPTS_VERSION, HV_NOW(hangar_process_opts));
HV_TABLE(hv_copy_opts, "copy options", HANGAR_COPY_OPTS_VERSION, HV_NOW(hangar_copy_opts));
HV_TABLE(hv_checkpoint_opts, "checkpoint options", HANGAR_CHECKPOINT_OPTS_VERSION, HV_NOW(hangar_checkpoint_opts));
HV_TABLE(hv_restore_opts, "restore options", HANGAR_RESTORE_OPTS_VERSION, HV_NOW(hangar_restore_opts));
HV_TABLE(hv_session_opts, "session options", HANGAR_SESSION_OPTS_VERSION, HV_UPTO(hangar_session_opts, sandbox),
	 HV_NOW(hangar_session_opts));
HV_TABLE(hv_suspend_opts, "suspend options", HANGAR_SUSPEND_OPTS_VERSION, HV_UPTO(hangar_suspend_opts, cancel),
	 HV_NOW(hangar_suspend_opts));
HV_TABLE(hv_session_fork_opts, "session fork options", HANGAR_SESSION_FORK_OPTS_VERSION,
	 HV_NOW(hangar_session_fork_opts));
HV_TABLE(hv_publish_opts, "publish options", HANGAR_PUBLISH_OPTS_VERSION, HV_NOW(hangar_publish_opts));
HV_TABLE(hv_template_build_opts, "template build options", HANGAR_TEMPLATE_BUILD_OPTS_VERSION,
	 HV_NOW(hangar_template_build_opts));
HV_TABLE(hv_image_opts, "image options", HANGAR_IMAGE_OPTS_VERSION, HV_NOW(hangar_image_opts));

/* ---- results: written by the library, never past the caller's size -------- */

HV_TABLE(hv_sandbox_info, "sandbox info", HANGAR_SANDBOX_INFO_VERSION, HV_NOW(hangar_sandbox_info));
HV_TABLE(hv_exec_result, "exec result", HANGAR_EXEC_RESULT_VERSION, HV_UPTO(hangar_exec_result, oom_killed),
	 HV_NOW(hangar_exec_result));
HV_TABLE(hv_checkpoint_info, "checkpoint info", HANGAR_CHECKPOINT_INFO_VERSION, HV_NOW(hangar_checkpoint_info));
HV_TABLE(hv_session_info, "session info", HANGAR_SESSION_INFO_VERSION, HV_NOW(hangar_session_info));
HV_TABLE(hv_reap_result, "reap result", HANGAR_REAP_RESULT_VERSION, HV_NOW(hangar_reap_result));
HV_TABLE(hv_envd_endpoint, "envd endpoint", HANGAR_ENVD_ENDPOINT_VERSION, HV_NOW(hangar_envd_endpoint));
HV_TABLE(hv_port_endpoint, "port endpoint", HANGAR_PORT_ENDPOINT_VERSION, HV_NOW(hangar_port_endpoint));
HV_TABLE(hv_image_info, "image info", HANGAR_IMAGE_INFO_VERSION, HV_NOW(hangar_image_info));
HV_TABLE(hv_image_progress, "image progress", HANGAR_IMAGE_PROGRESS_VERSION, HV_NOW(hangar_image_progress));

int hversioned_init(void *p, uint32_t version, const struct hversions *v)
{
	struct hversioned *h = p;

	if (!p)
		return herr(HANGAR_EINVAL, HANGAR_ERRCAT_ARGUMENT, "invalid argument: %s is NULL", v->what);
	if (version < 1 || version > v->newest)
		return herr(HANGAR_EINVAL, HANGAR_ERRCAT_ARGUMENT,
			    "invalid argument: %s version %u is not one this library knows (1 to %u)", v->what,
			    (unsigned)version, (unsigned)v->newest);
	memset(p, 0, v->size[version - 1]);
	h->version = version;
	h->size = v->size[version - 1];
	return 0;
}
