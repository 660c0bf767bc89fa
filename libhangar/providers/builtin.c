/*
 * The providers every context has, in the order they are registered. The
 * only place that names them: the core walks this list and knows none.
 */
#include "../core/internal.h"

extern const struct hangar_provider_ops local_provider_ops;
extern const struct hangar_provider_ops e2b_provider_ops;

const struct hangar_provider_ops *const hangar_builtin_providers[] = {
	&local_provider_ops,
	&e2b_provider_ops,
	NULL,
};
