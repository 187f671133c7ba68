/*
 * limits.c -- how each limit is enforced: decided once per sandbox, from
 * the policy, the backend and what this machine allows.
 *
 * Each limit goes to the strongest mechanism present:
 *
 *   memory       a cgroup (v2, else v1) for the whole tree; else RLIMIT_AS,
 *                per process, counting address space rather than memory in
 *                use; the watchdog only when asked for by strategy
 *   cpus         a cgroup's CPU quota; else nothing
 *   cpu_seconds  RLIMIT_CPU, per process: SIGXCPU at the limit, SIGKILL one
 *                second later
 *   processes    a cgroup's pids.max for the whole tree; else RLIMIT_NPROC,
 *                which the kernel counts per user and never applies to root
 *   file_size    RLIMIT_FSIZE: SIGXFSZ, then EFBIG
 *   open_files   RLIMIT_NOFILE
 *   core_dumps   RLIMIT_CORE, 0 unless the policy allows them
 *
 * The processes limit counts the command's tree; the backend's own processes
 * (bubblewrap's two) come on top.
 *
 * Whatever is weaker than asked, or not enforced at all, is a warning in
 * every result, and the mechanism says which one holds: never "enforced"
 * when it is not.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "internal.h"
#include "cgroup.h"

static int warn(sbx__strv *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int warn(sbx__strv *w, const char *fmt, ...)
{
	char text[768];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(text, sizeof text, fmt, ap);
	va_end(ap);
	return sbx__strv_push(w, text);
}

static enum sbx_mechanism cg_mech(const struct sbx__cg_caps *caps)
{
	return caps->version == SBX__CG_V2 ? SBX_MECH_CGROUP_V2 : SBX_MECH_CGROUP_V1;
}

static void add_rlimit(struct sbx__plan *plan, int resource, unsigned long long cur,
                       unsigned long long max)
{
	if (plan->nrlimits < SBX__ARRAY_LEN(plan->rlimits))
		plan->rlimits[plan->nrlimits++] = (struct sbx__rlimit){ resource, cur, max };
}

int sbx__limits_plan(const sbx_policy *p, const struct sbx__cg_caps *caps,
                     unsigned own_processes, struct sbx__plan *plan, sbx__strv *w)
{
	memset(plan, 0, sizeof *plan);
	enum sbx_mechanism *mech = plan->mech;
	int rc = 0;
	const char *no_cg = caps->why[0] ? caps->why : "no usable cgroup";

	/* Memory, by strategy. */
	if (p->memory) {
		bool cg = caps->ctrl[SBX__CG_MEMORY];
		switch (p->memory_strategy) {
		case SBX_MEMORY_NONE:
			mech[SBX_LIMIT_MEMORY] = SBX_MECH_NONE;
			rc = warn(w, "memory limit not enforced: the memory strategy is none");
			break;
		case SBX_MEMORY_WATCHDOG:
			mech[SBX_LIMIT_MEMORY] = SBX_MECH_WATCHDOG;
			plan->watchdog_memory = p->memory;
			rc = warn(w, "memory is enforced by a watchdog that samples the tree's resident "
			             "memory every 0.25 s: it can be overshot between samples");
			break;
		case SBX_MEMORY_AUTO:
		case SBX_MEMORY_KERNEL:
			if (cg) {
				mech[SBX_LIMIT_MEMORY] = cg_mech(caps);
				plan->cg.memory = p->memory;
				if (!caps->memory_swap)
					rc = warn(w, "memory limit does not cover swap: the kernel does not "
					             "account swap per cgroup here");
			} else {
				mech[SBX_LIMIT_MEMORY] = SBX_MECH_RLIMIT;
				add_rlimit(plan, RLIMIT_AS, p->memory, p->memory);
				rc = warn(w, "memory is limited per process by RLIMIT_AS, which counts address "
				             "space rather than memory in use, and not for the tree as a whole "
				             "(%s)", no_cg);
			}
			break;
		}
	}

	if (rc == 0 && p->cpus) {
		if (caps->ctrl[SBX__CG_CPU]) {
			mech[SBX_LIMIT_CPUS] = cg_mech(caps);
			plan->cg.cpus = p->cpus;
		} else {
			mech[SBX_LIMIT_CPUS] = SBX_MECH_NONE;
			rc = warn(w, "cpus limit not enforced: only a cgroup can hold a share of the "
			             "processors (%s)", no_cg);
		}
	}

	if (rc == 0 && p->cpu_seconds) {
		mech[SBX_LIMIT_CPU_SECONDS] = SBX_MECH_RLIMIT;
		add_rlimit(plan, RLIMIT_CPU, p->cpu_seconds, p->cpu_seconds + 1);
		rc = warn(w, "cpu_seconds is counted per process (RLIMIT_CPU, threads included): "
		             "work spread over several processes can use more in total");
	}

	if (rc == 0 && p->processes) {
		if (caps->ctrl[SBX__CG_PIDS]) {
			mech[SBX_LIMIT_PROCESSES] = cg_mech(caps);
			plan->cg.processes = p->processes + own_processes;
		} else if (getuid() == 0) {
			mech[SBX_LIMIT_PROCESSES] = SBX_MECH_NONE;
			rc = warn(w, "processes limit not enforced: the kernel never applies RLIMIT_NPROC "
			             "to root, and %s", no_cg);
		} else {
			/* Under bubblewrap too: the count in the sandbox's user
			 * namespace is checked against the limit at every level up to
			 * ours, where every process of this user counts. */
			mech[SBX_LIMIT_PROCESSES] = SBX_MECH_RLIMIT;
			plan->nproc = p->processes + own_processes;
			rc = warn(w, "processes are limited by RLIMIT_NPROC, which counts every process and "
			             "thread of this user: it is set to those already running plus the "
			             "limit, so other work of this user can use up the margin, and a "
			             "refused fork gives no processes verdict (%s)", no_cg);
		}
	}

	if (rc == 0 && p->file_size) {
		mech[SBX_LIMIT_FILE_SIZE] = SBX_MECH_RLIMIT;
		add_rlimit(plan, RLIMIT_FSIZE, p->file_size, p->file_size);
	}
	if (rc == 0 && p->open_files) {
		mech[SBX_LIMIT_OPEN_FILES] = SBX_MECH_RLIMIT;
		add_rlimit(plan, RLIMIT_NOFILE, p->open_files, p->open_files);
	}
	mech[SBX_LIMIT_CORE_DUMPS] = SBX_MECH_RLIMIT;
	if (!p->core_dumps)
		add_rlimit(plan, RLIMIT_CORE, 0, 0);

	plan->use_cgroup = plan->cg.memory || plan->cg.cpus || plan->cg.processes;
	return rc < 0 ? -ENOMEM : 0;
}
