/* sync.c -- one command, blocking, on a private loop. */
#include <errno.h>

#include <event2/event.h>

#include "internal.h"

static void on_done(sbx_result *result, void *arg)
{
	*(sbx_result **)arg = result;
}

int sbx_run_sync(const sbx_policy *policy, const sbx_sandbox_options *sandbox_options,
                 const sbx_run_options *o, sbx_result **out, sbx_error *err)
{
	if (!out)
		return sbx__error(err, -EINVAL, "sbx_run_sync needs a place for the result");
	*out = NULL;
	struct event_base *base = event_base_new();
	if (!base)
		return sbx__error(err, -ENOMEM, "could not make an event loop");
	sbx_sandbox *sb = NULL;
	int rc = sbx_sandbox_new(base, policy, sandbox_options, &sb, err);
	if (rc == 0)
		rc = sbx_run_start(sb, o, on_done, out, NULL, err);
	if (rc == 0)
		event_base_dispatch(base);
	sbx_sandbox_free(sb);
	event_base_free(base);
	return rc;
}
