/*
 * limits.c -- how each limit is enforced.
 *
 * Core dumps are always decided: RLIMIT_CORE is set in every child (0 unless
 * the policy allows them).  The other limits are not enforced by this
 * version, and every one a policy asks for is reported as such.
 */
#include <errno.h>
#include <stdio.h>

#include "internal.h"

int sbx__describe_limits(const sbx_policy *p, enum sbx_mechanism mech[SBX_LIMIT_COUNT],
                         sbx__strv *w)
{
	for (int l = 0; l < SBX_LIMIT_COUNT; l++) {
		if (!sbx__policy_wants(p, (enum sbx_limit)l)) {
			mech[l] = SBX_MECH_UNSET;
			continue;
		}
		if (l == SBX_LIMIT_CORE_DUMPS) {
			mech[l] = SBX_MECH_RLIMIT;
			continue;
		}
		mech[l] = SBX_MECH_NONE;
		char text[160];
		snprintf(text, sizeof text, "%s limit not enforced: this version of sbx does not "
		         "enforce resource limits yet", sbx_limit_name((enum sbx_limit)l));
		if (sbx__strv_push(w, text) < 0)
			return -ENOMEM;
	}
	return 0;
}
