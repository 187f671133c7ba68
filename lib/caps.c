/*
 * caps.c -- what this machine can enforce, found by reading files only.
 *
 * Nothing here starts a process or creates anything: it answers from
 * /proc/sys and the backends' own checks, so a host can ask before it
 * decides to run anything.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"

static sbx_caps_item *item(sbx_caps_item *v, unsigned *n, const char *name, bool available,
                           const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static sbx_caps_item *item(sbx_caps_item *v, unsigned *n, const char *name, bool available,
                           const char *fmt, ...)
{
	if (*n >= SBX_CAPS_MAX)
		return NULL;
	sbx_caps_item *it = &v[(*n)++];
	it->name = name;
	it->available = available;
	it->mechanism = SBX_MECH_UNSET;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(it->detail, sizeof it->detail, fmt, ap);
	va_end(ap);
	return it;
}

#define FEATURE(out, name, ok, ...) item((out)->features, &(out)->nfeatures, name, ok, __VA_ARGS__)

static void bwrap_features(sbx_caps *out)
{
	FEATURE(out, "isolation", true,
	        "bubblewrap: new user, PID, IPC, UTS and cgroup namespaces");
	FEATURE(out, "writable_paths", true,
	        "the root is bound read-only and each writable path read-write at the same place");
	FEATURE(out, "deny_write", true,
	        "read-only bind mounts, also over paths inside writable ones; a missing path gets a "
	        "read-only mount so it cannot be created");
	FEATURE(out, "deny_read", true,
	        "an unreadable empty file or a mode-000 read-only tmpfs over the path, also over "
	        "missing paths inside writable ones");
	FEATURE(out, "network_none", true, "an empty network namespace: only its own loopback");
	FEATURE(out, "protected_defaults", true,
	        "shell, git and editor configuration read-only inside writable paths; credentials "
	        "and container sockets hidden");
	FEATURE(out, "tmp", true, "a private /tmp, /dev and /proc");
	FEATURE(out, "privileges", true,
	        "no_new_privs, every capability dropped, nested user namespaces disabled, a new "
	        "session without a controlling terminal");
	FEATURE(out, "process_tree", true,
	        "a PID namespace: killing its first process ends every process in it; it dies with "
	        "the supervisor");
	FEATURE(out, "environment", true, "an allowlist of the caller's variables plus the policy's");
}

static void passthrough_features(sbx_caps *out)
{
	static const char why[] = "not enforced: the passthrough backend isolates nothing";
	FEATURE(out, "isolation", false, "%s", why);
	FEATURE(out, "writable_paths", false, "%s", why);
	FEATURE(out, "deny_write", false, "%s", why);
	FEATURE(out, "deny_read", false, "%s", why);
	FEATURE(out, "network_none", false, "%s", why);
	FEATURE(out, "protected_defaults", false, "%s", why);
	FEATURE(out, "tmp", false, "%s", why);
	FEATURE(out, "privileges", false, "a new session without a controlling terminal only");
	FEATURE(out, "process_tree", false,
	        "the process group and the descendants found in /proc; a process that detaches "
	        "after its parent exited is not found");
	FEATURE(out, "environment", true, "an allowlist of the caller's variables plus the policy's");
}

/* How |mech| enforces limit |l|, or why nothing does. */
static void limit_item(sbx_caps_item *it, enum sbx_limit l, enum sbx_mechanism mech,
                       const struct sbx__cg_caps *cg)
{
	static const char *const cg_file[2][SBX_LIMIT_COUNT] = {
		[0] = { [SBX_LIMIT_MEMORY] = "memory.limit_in_bytes", [SBX_LIMIT_CPUS] = "cpu.cfs_quota_us",
		        [SBX_LIMIT_PROCESSES] = "pids.max" },
		[1] = { [SBX_LIMIT_MEMORY] = "memory.max", [SBX_LIMIT_CPUS] = "cpu.max",
		        [SBX_LIMIT_PROCESSES] = "pids.max" },
	};
	static const char *const rlimit_text[SBX_LIMIT_COUNT] = {
		[SBX_LIMIT_MEMORY] = "RLIMIT_AS, per process, counting address space",
		[SBX_LIMIT_CPU_SECONDS] = "RLIMIT_CPU, per process (threads included)",
		[SBX_LIMIT_PROCESSES] = "RLIMIT_NPROC, counting every process of this user",
		[SBX_LIMIT_FILE_SIZE] = "RLIMIT_FSIZE",
		[SBX_LIMIT_OPEN_FILES] = "RLIMIT_NOFILE",
		[SBX_LIMIT_CORE_DUMPS] = "RLIMIT_CORE, 0 unless the policy allows core dumps",
	};
	it->name = sbx_limit_name(l);
	it->mechanism = mech;
	it->available = mech != SBX_MECH_NONE;
	const char *why = cg->why[0] ? cg->why : "no usable cgroup";
	switch (mech) {
	case SBX_MECH_CGROUP_V1:
	case SBX_MECH_CGROUP_V2:
		snprintf(it->detail, sizeof it->detail, "a cgroup per run (%s), for the whole tree",
		         cg_file[mech == SBX_MECH_CGROUP_V2][l]);
		break;
	case SBX_MECH_RLIMIT:
		snprintf(it->detail, sizeof it->detail, "%s%s%.400s", rlimit_text[l],
		         l == SBX_LIMIT_MEMORY || l == SBX_LIMIT_PROCESSES ? "; no cgroup: " : "",
		         l == SBX_LIMIT_MEMORY || l == SBX_LIMIT_PROCESSES ? why : "");
		break;
	case SBX_MECH_WATCHDOG:
		snprintf(it->detail, sizeof it->detail, "a watchdog sampling the tree every 0.25 s");
		break;
	default:
		snprintf(it->detail, sizeof it->detail, "not enforced: %s%.400s",
		         l == SBX_LIMIT_PROCESSES ? "RLIMIT_NPROC never applies to root, and " : "", why);
		break;
	}
}

int sbx_caps_get(enum sbx_backend backend, sbx_caps *out)
{
	memset(out, 0, sizeof *out);
	char why[512];
	bool bwrap_ok = sbx__bwrap_caps(why, sizeof why) == 0;
	item(out->backends, &out->nbackends, "bwrap", bwrap_ok, "%s", why);
	item(out->backends, &out->nbackends, "passthrough", true,
	     "always usable; isolates nothing");
	item(out->backends, &out->nbackends, "native", false, "not built into this version");
	item(out->backends, &out->nbackends, "landlock", false, "not built into this version");

	switch (backend) {
	case SBX_BACKEND_AUTO:
	case SBX_BACKEND_BWRAP:
		if (!bwrap_ok && backend == SBX_BACKEND_BWRAP)
			return -ENOENT;
		if (!bwrap_ok)
			break; /* auto has nothing to pick */
		out->backend = "bwrap";
		bwrap_features(out);
		break;
	case SBX_BACKEND_PASSTHROUGH:
		out->backend = "passthrough";
		passthrough_features(out);
		break;
	default:
		return -ENOENT;
	}

	/* Limits: the plan a policy asking for all of them would get. */
	sbx_policy all = { .memory = 1, .cpus = 1, .cpu_seconds = 1, .processes = 1,
	                   .file_size = 1, .open_files = 1 };
	struct sbx__cg_caps cg;
	struct sbx__plan plan;
	sbx__strv warnings = {0};
	sbx__cg_probe(SBX__CGROUP_ROOT, "/proc/self/cgroup", &cg);
	int rc = sbx__limits_plan(&all, &cg, 0, &plan, &warnings);
	sbx__strv_free(&warnings);
	if (rc == 0)
		for (int l = 0; l < SBX_LIMIT_COUNT; l++)
			limit_item(&out->limits[l], (enum sbx_limit)l, plan.mech[l], &cg);
	sbx__cg_caps_free(&cg);
	return rc;
}
