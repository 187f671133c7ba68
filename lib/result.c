/* result.c -- the result a callback owns, and the names the JSON uses. */
#include <stdlib.h>

#include "internal.h"

void sbx_result_free(sbx_result *r)
{
	if (!r)
		return;
	free(r->out[SBX_STDOUT].data);
	free(r->out[SBX_STDERR].data);
	free(r->error);
	for (unsigned i = 0; i < r->resources.nwarnings; i++)
		free(r->resources.warnings[i]);
	free(r);
}

const char *sbx_mechanism_name(enum sbx_mechanism m)
{
	switch (m) {
	case SBX_MECH_UNSET: return "unset";
	case SBX_MECH_NONE: return "none";
	case SBX_MECH_RLIMIT: return "rlimit";
	case SBX_MECH_WATCHDOG: return "watchdog";
	case SBX_MECH_CGROUP_V1: return "cgroup_v1";
	case SBX_MECH_CGROUP_V2: return "cgroup_v2";
	}
	return "unknown";
}

const char *sbx_limit_name(enum sbx_limit l)
{
	switch (l) {
	case SBX_LIMIT_MEMORY: return "memory";
	case SBX_LIMIT_CPUS: return "cpus";
	case SBX_LIMIT_CPU_SECONDS: return "cpu_seconds";
	case SBX_LIMIT_PROCESSES: return "processes";
	case SBX_LIMIT_FILE_SIZE: return "file_size";
	case SBX_LIMIT_OPEN_FILES: return "open_files";
	case SBX_LIMIT_CORE_DUMPS: return "core_dumps";
	case SBX_LIMIT_COUNT: break;
	}
	return "unknown";
}

const char *sbx_hit_name(enum sbx_hit h)
{
	switch (h) {
	case SBX_HIT_MEMORY: return "memory";
	case SBX_HIT_CPU: return "cpu";
	case SBX_HIT_PROCESSES: return "processes";
	case SBX_HIT_FILE_SIZE: return "file_size";
	case SBX_HIT_OUTPUT: return "output";
	case SBX_HIT_COUNT: break;
	}
	return "unknown";
}
