/*
 * backend_passthrough.c -- no isolation, said out loud.
 *
 * The command runs as the caller with the caller's view of the machine.  The
 * run engine still gives it a session of its own, a clean environment, no
 * inherited fds, a timeout and output caps; everything the policy asks for
 * beyond that is named in a warning on every result.
 */
#include <errno.h>

#include "internal.h"

static int warn(sbx__strv *w, const char *text)
{
	return sbx__strv_push(w, text);
}

static int passthrough_describe(const sbx_policy *p, sbx__strv *w)
{
	int rc = warn(w, "not isolated: the passthrough backend runs the command as this user, "
	                 "with every file and the network this user can reach");
	if (rc == 0)
		rc = warn(w, "process tree not contained: a process that detaches (setsid) and outlives "
		             "its parent is not found when the run ends, unless the run has a cgroup");
	if (rc == 0 && p->writable.n)
		rc = warn(w, "writable paths not enforced: everything this user can write is writable");
	if (rc == 0 && p->deny_write.n)
		rc = warn(w, "deny-write paths not enforced by the passthrough backend");
	if (rc == 0 && p->deny_read.n)
		rc = warn(w, "deny-read paths not enforced by the passthrough backend");
	if (rc == 0 && p->network == SBX_NETWORK_NONE)
		rc = warn(w, "network none not enforced: the passthrough backend has no network isolation");
	if (rc == 0 && p->protect_defaults)
		rc = warn(w, "protected defaults not enforced: credentials and shell configuration are "
		             "reachable with passthrough");

	return rc < 0 ? -ENOMEM : 0;
}

const struct sbx__backend sbx__backend_passthrough = {
	.name = "passthrough",
	.isolated = false,
	.describe = passthrough_describe,
};
