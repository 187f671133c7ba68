/*
 * cgroup.h -- a cgroup per run, on cgroup v2 or v1, for the limits the
 * kernel can hold a whole process tree to: memory, processes and cpus.
 *
 * Contract (the run engine relies on it; lib/cgroup.c implements it):
 *   - sbx__cg_probe() finds what this process may do, reading files only.
 *   - sbx__cg_create() makes the run's cgroup(s) and writes the limits.
 *   - sbx__cg_enter() runs in the vfork child before exec: open, write,
 *     close only, no allocation; it moves the child into the run's cgroups.
 *   - sbx__cg_stats() reads peak memory, OOM kills, refused forks, cpu time.
 *   - sbx__cg_kill() ends every process in the run's cgroups.
 *   - sbx__cg_destroy() removes them (killing what is left first).
 *   - sbx__cg_reclaim() removes those a killed supervisor left behind.
 * Every path is under the root given to sbx__cg_probe(), so the tests can
 * point it at a fake tree.
 */
#ifndef SBX_CGROUP_H
#define SBX_CGROUP_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "sbx.h"

enum sbx__cg_version { SBX__CG_NONE = 0, SBX__CG_V1, SBX__CG_V2 };

/* Controllers, also indexes of the v1 per-controller directories. */
enum sbx__cg_ctrl { SBX__CG_MEMORY = 0, SBX__CG_PIDS, SBX__CG_CPU, SBX__CG_NCTRL };
/* v1 only: one more directory slot after the controllers, in the cpuacct
 * hierarchy, which measures the cpu time of a run but limits nothing.  It is
 * used when cpuacct is mounted apart from cpu (with "cpu,cpuacct" mounted
 * together, the cpu directory measures as well). */
enum { SBX__CG_CPUACCT = SBX__CG_NCTRL, SBX__CG_NDIR };

/* What this process may do, found by reading files only. */
struct sbx__cg_caps {
	enum sbx__cg_version version;   /* NONE: no usable cgroup */
	bool ctrl[SBX__CG_NCTRL];       /* the controller can limit a run */
	bool memory_swap;               /* swap can be limited too */
	/* Where run cgroups are made: v2 one directory, v1 one per controller
	 * (NULL when that controller is unusable), and v1 cpuacct when it is
	 * mounted on its own.  Owned; see _caps_free(). */
	char *parent[SBX__CG_NDIR];
	char why[512];                  /* what is missing, for warnings and caps */
};

/*
 * Fills |caps| from |root| (normally "/sys/fs/cgroup") and |self| (normally
 * "/proc/self/cgroup").  Never fails: an unusable machine is version NONE
 * with the reason in why.  v2 is usable when this process's cgroup (or one
 * it can write below) already has the controllers in cgroup.subtree_control
 * and is writable: delegation.  v1 when this process can make directories
 * in its controllers' cgroups.
 */
void sbx__cg_probe(const char *root, const char *self, struct sbx__cg_caps *caps);
void sbx__cg_caps_free(struct sbx__cg_caps *caps);

struct sbx__cg_limits {
	uint64_t memory;    /* bytes; 0: none (swap limited along, when possible) */
	double cpus;        /* cores; 0: none */
	uint64_t processes; /* 0: none */
};

/* One run's cgroups; {0} is none. */
struct sbx__cg {
	enum sbx__cg_version version;
	char *dir[SBX__CG_NDIR];     /* v2: dir[0] only; v1: per controller used */
	char *procs[SBX__CG_NDIR];   /* their cgroup.procs, for sbx__cg_enter() */
};

/*
 * Makes the run's cgroups, named |name| ("sbx-PID-SEQ"), with |lim|.  A limit
 * asked of a controller caps->ctrl says is unusable is an error, never
 * dropped.  On v1 the memory directory (for the peak) and the cpu time
 * directory are made even when nothing is limited there.  A directory of
 * that name that exists already is taken over if it holds no process: the
 * name carries our pid, so it is a leftover of a dead process that had it,
 * or a fake tree's run directory that a test made with its files.  On
 * failure nothing is left and *cg is {0}.
 */
int sbx__cg_create(const struct sbx__cg_caps *caps, const char *name,
                   const struct sbx__cg_limits *lim, struct sbx__cg *cg, sbx_error *err);
/* In the child: joins the cgroups; 0 or an errno. */
int sbx__cg_enter(const struct sbx__cg *cg);

struct sbx__cg_stats {
	int64_t peak_memory;   /* bytes, -1 unknown */
	bool oom_killed;       /* the memory limit killed something */
	bool pids_max;         /* a fork was refused by the pids limit */
	double cpu_user, cpu_system; /* seconds of the whole tree, -1 unknown */
};
/* Always 0; what cannot be read stays unknown (-1, false). */
int sbx__cg_stats(const struct sbx__cg *cg, struct sbx__cg_stats *st);

/* Sends SIGKILL to every process in the run's cgroups: v2 through
 * cgroup.kill, at once; v1 (and v2 before Linux 5.14) to what cgroup.procs
 * lists, round after round until no new process shows up (a millisecond or
 * a few; -EBUSY if some still appear after 32 rounds).  The killed may take
 * a moment to exit: sbx__cg_empty() says when they have.  A killed child of
 * ours is not listed while it waits to be reaped. */
int sbx__cg_kill(const struct sbx__cg *cg);
bool sbx__cg_empty(const struct sbx__cg *cg);
/* Kills what is left, removes the directories, frees |cg|.  Blocks at most
 * about half a second, only when something had to be killed. */
void sbx__cg_destroy(struct sbx__cg *cg);
/* Removes run cgroups whose supervisor (the PID in the name) is gone. */
void sbx__cg_reclaim(const struct sbx__cg_caps *caps);

#endif /* SBX_CGROUP_H */
