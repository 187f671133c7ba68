/*
 * check_cgroup.c -- run cgroups (lib/cgroup.c): finding what this process
 * may do, making a run's cgroups with their limits, reading the verdicts,
 * ending the tree, removing the cgroups, reclaiming a dead supervisor's.
 *
 * This machine has no cgroup v2 controllers (every controller is on v1, and
 * the v2 mount at /sys/fs/cgroup/unified has none), so a fake tree stands
 * in for the v2 paths: plain directories and files laid out as the kernel
 * lays them out.  The tests play the kernel's part in it: they make a run's
 * directory with its interface files before sbx__cg_create() takes it over
 * (what mkdir does on a cgroup file system), and write the counters the
 * kernel would keep.  The same is done for a v1 layout with cpu and cpuacct
 * mounted together, which this machine does not have either.
 *
 * The real v1 tests need root and writable v1 memory and pids cgroups; they
 * pass with a "SKIP" line on stderr elsewhere.  Their run cgroups are named
 * after the suite's main process, "sbx-MAINPID-SEQ", as a supervisor names
 * its runs', and the last test checks that none is left.
 */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"
#include "cgroup.h"

#define MIB (1024 * 1024)
#define TIMEOUT 60

static pid_t suite_pid;          /* the "supervisor" in run cgroup names */
static char tree[64];            /* the fake tree of the test, or "" */

/* ---------------------------------------------------------------- helpers */

static void name_of(char buf[64], int seq)
{
	snprintf(buf, 64, "sbx-%d-%d", (int)suite_pid, seq);
}

static void mkdirs(const char *path)
{
	char p[PATH_MAX];
	snprintf(p, sizeof p, "%s", path);
	for (char *s = strchr(p + 1, '/'); s; s = strchr(s + 1, '/')) {
		*s = '\0';
		mkdir(p, 0755);
		*s = '/';
	}
	ck_assert_msg(mkdir(p, 0755) == 0 || errno == EEXIST, "mkdir %s: %s", p, strerror(errno));
}

/* Writes |content| to |dir|/|rel|, making the directories on the way. */
static void put(const char *dir, const char *rel, const char *content)
{
	char p[PATH_MAX];
	snprintf(p, sizeof p, "%s/%s", dir, rel);
	char *slash = strrchr(p, '/');
	*slash = '\0';
	mkdirs(p);
	*slash = '/';
	int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	ck_assert_msg(fd >= 0, "open %s: %s", p, strerror(errno));
	size_t len = strlen(content);
	ck_assert_int_eq(write(fd, content, len), (ssize_t)len);
	close(fd);
}

/* The content of |dir|/|file|, or "<missing>". */
static const char *slurp(const char *dir, const char *file)
{
	static char buf[4096];
	char p[PATH_MAX];
	snprintf(p, sizeof p, "%s/%s", dir, file);
	int fd = open(p, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return "<missing>";
	ssize_t n = read(fd, buf, sizeof buf - 1);
	close(fd);
	buf[n < 0 ? 0 : n] = '\0';
	return buf;
}

static void assert_file(const char *dir, const char *file, const char *want)
{
	const char *got = slurp(dir, file);
	ck_assert_msg(strcmp(got, want) == 0, "%s/%s: expected \"%s\", got \"%s\"", dir, file, want,
	              got);
}

static bool exists(const char *path)
{
	struct stat st;
	return lstat(path, &st) == 0;
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)ftw;
	if (flag == FTW_DP)
		rmdir(path);
	else
		unlink(path);
	return 0;
}

static void rm_tree(const char *path)
{
	nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

/* A pid that was ours and is now dead and reaped. */
static pid_t dead_pid(void)
{
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0)
		_exit(0);
	ck_assert_int_eq(waitpid(pid, NULL, 0), pid);
	return pid;
}

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
	nanosleep(&ts, NULL);
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ------------------------------------------------------------ fake trees */

static void tree_setup(void)
{
	snprintf(tree, sizeof tree, "/tmp/check_cgroup-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(tree));
}

static void tree_teardown(void)
{
	if (tree[0])
		rm_tree(tree);
	tree[0] = '\0';
}

/* A pure v2 host (ROOT/cgroup.controllers) with this process in /svc,
 * whose cgroup.subtree_control says |subtree|. */
static void fake_v2(const char *subtree, bool swap)
{
	put(tree, "cgroup.controllers", "cpuset cpu io memory hugetlb pids rdma misc\n");
	put(tree, "cgroup.subtree_control", "cpu memory pids\n");
	put(tree, "svc/cgroup.controllers", "cpu memory pids\n");
	put(tree, "svc/cgroup.subtree_control", subtree);
	put(tree, "svc/cgroup.procs", "");
	if (swap)
		put(tree, "svc/memory.swap.max", "max\n");
	put(tree, "self", "0::/svc\n");
}

/* What the kernel makes with a v2 run directory svc/|name|. */
static void fake_v2_run(const char *name, bool swap)
{
	static const char *const files[][2] = {
		{ "cgroup.procs", "" },
		{ "cgroup.kill", "" },
		{ "cgroup.events", "populated 0\nfrozen 0\n" },
		{ "memory.max", "max\n" },
		{ "memory.peak", "0\n" },
		{ "memory.events", "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\noom_group_kill 0\n" },
		{ "pids.max", "max\n" },
		{ "pids.events", "max 0\n" },
		{ "cpu.max", "max 100000\n" },
		{ "cpu.stat", "usage_usec 0\nuser_usec 0\nsystem_usec 0\n" },
	};
	char rel[PATH_MAX];
	for (size_t i = 0; i < SBX__ARRAY_LEN(files); i++) {
		snprintf(rel, sizeof rel, "svc/%s/%s", name, files[i][0]);
		put(tree, rel, files[i][1]);
	}
	if (swap) {
		snprintf(rel, sizeof rel, "svc/%s/memory.swap.max", name);
		put(tree, rel, "max\n");
	}
}

static void probe_tree(struct sbx__cg_caps *caps)
{
	char self[PATH_MAX];
	snprintf(self, sizeof self, "%s/self", tree);
	sbx__cg_probe(tree, self, caps);
}

static char *tree_path(const char *rel)
{
	static char p[PATH_MAX];
	snprintf(p, sizeof p, "%s/%s", tree, rel);
	return p;
}

static void assert_why(const struct sbx__cg_caps *caps, const char *part)
{
	ck_assert_msg(strstr(caps->why, part), "why lacks \"%s\": %s", part, caps->why);
}

/* ------------------------------------------------------- fake v2: probe */

START_TEST(fake_v2_delegated)
{
	struct sbx__cg_caps caps;
	fake_v2("memory pids cpu\n", true);
	probe_tree(&caps);
	ck_assert_msg(caps.version == SBX__CG_V2, "not v2: %s", caps.why);
	for (int i = 0; i < SBX__CG_NCTRL; i++)
		ck_assert(caps.ctrl[i]);
	ck_assert(caps.memory_swap);
	ck_assert_str_eq(caps.parent[0], tree_path("svc"));
	for (int i = 1; i < SBX__CG_NDIR; i++)
		ck_assert_ptr_null(caps.parent[i]);
	ck_assert_str_eq(caps.why, "");
	sbx__cg_caps_free(&caps);
	ck_assert_ptr_null(caps.parent[0]);

	/* Without memory.swap.max the kernel does not account swap: say so. */
	unlink(tree_path("svc/memory.swap.max"));
	probe_tree(&caps);
	ck_assert(caps.version == SBX__CG_V2);
	ck_assert(!caps.memory_swap);
	assert_why(&caps, "swap is not limited");
	sbx__cg_caps_free(&caps);

	/* The root cgroup (a container's own namespace, say) is exempt from
	 * the no-processes rule and tells swap through its children. */
	put(tree, "self", "0::/\n");
	put(tree, "svc/memory.swap.max", "max\n");
	probe_tree(&caps);
	ck_assert_msg(caps.version == SBX__CG_V2, "root not v2: %s", caps.why);
	ck_assert_str_eq(caps.parent[0], tree);
	ck_assert(caps.memory_swap);
	sbx__cg_caps_free(&caps);
}
END_TEST

START_TEST(fake_v2_not_delegated)
{
	struct sbx__cg_caps caps;
	fake_v2("", true);
	probe_tree(&caps);
	ck_assert(caps.version == SBX__CG_NONE);
	for (int i = 0; i < SBX__CG_NDIR; i++)
		ck_assert_ptr_null(caps.parent[i]);
	assert_why(&caps, "no delegated cgroup v2 subtree: this process's cgroup /svc lists no "
	                  "controllers in");
	assert_why(&caps, "svc/cgroup.subtree_control");
	assert_why(&caps, "no cgroup v1");
	sbx__cg_caps_free(&caps);

	/* Two of three is not enough; cpuset is not cpu. */
	put(tree, "svc/cgroup.subtree_control", "cpuset memory pids\n");
	probe_tree(&caps);
	ck_assert(caps.version == SBX__CG_NONE);
	assert_why(&caps, "cgroup.subtree_control lacks cpu");
	sbx__cg_caps_free(&caps);

	put(tree, "svc/cgroup.subtree_control", "cpu io\n");
	probe_tree(&caps);
	ck_assert(caps.version == SBX__CG_NONE);
	assert_why(&caps, "lacks memory, pids");
	sbx__cg_caps_free(&caps);
}
END_TEST

START_TEST(fake_v2_missing_dir)
{
	struct sbx__cg_caps caps;
	fake_v2("memory pids cpu\n", true);
	put(tree, "self", "0::/gone\n");
	probe_tree(&caps);
	ck_assert(caps.version == SBX__CG_NONE);
	assert_why(&caps, "/gone does not exist");
	sbx__cg_caps_free(&caps);

	/* A cgroup outside our namespace shows as "/.."; it is not ours. */
	put(tree, "self", "0::/../other\n");
	probe_tree(&caps);
	ck_assert(caps.version == SBX__CG_NONE);
	assert_why(&caps, "names no usable v2 cgroup");
	sbx__cg_caps_free(&caps);

	/* No v2 hierarchy at all, and an unreadable self file. */
	unlink(tree_path("cgroup.controllers"));
	put(tree, "self", "0::/svc\n");
	probe_tree(&caps);
	ck_assert(caps.version == SBX__CG_NONE);
	assert_why(&caps, "no cgroup v2 hierarchy at");
	sbx__cg_caps_free(&caps);

	sbx__cg_probe(tree, tree_path("no-such-file"), &caps);
	ck_assert(caps.version == SBX__CG_NONE);
	assert_why(&caps, "cannot read");
	sbx__cg_caps_free(&caps);
}
END_TEST

/* ------------------------------------------------------ fake v2: create */

START_TEST(fake_v2_create)
{
	struct sbx__cg_caps caps;
	struct sbx__cg cg;
	sbx_error err = {0};
	char name[64], dir[PATH_MAX], procs[PATH_MAX + 16];
	struct sbx__cg_limits lim = { .memory = 64 * MIB, .cpus = 0.5, .processes = 20 };

	fake_v2("memory pids cpu\n", true);
	probe_tree(&caps);
	ck_assert(caps.version == SBX__CG_V2);

	name_of(name, 1);
	fake_v2_run(name, true);
	snprintf(dir, sizeof dir, "%s/svc/%s", tree, name);
	ck_assert_msg(sbx__cg_create(&caps, name, &lim, &cg, &err) == 0, "%s", err.message);
	ck_assert(cg.version == SBX__CG_V2);
	ck_assert_str_eq(cg.dir[0], dir);
	snprintf(procs, sizeof procs, "%s/cgroup.procs", dir);
	ck_assert_str_eq(cg.procs[0], procs);
	for (int i = 1; i < SBX__CG_NDIR; i++)
		ck_assert_ptr_null(cg.dir[i]);
	assert_file(dir, "memory.max", "67108864\n");
	assert_file(dir, "memory.swap.max", "0\n");
	assert_file(dir, "pids.max", "20\n");
	assert_file(dir, "cpu.max", "50000 100000\n");
	/* The child writes "0", which means "the writer". */
	ck_assert_int_eq(sbx__cg_enter(&cg), 0);
	assert_file(dir, "cgroup.procs", "0\n");
	sbx__cg_destroy(&cg);
	ck_assert(cg.version == SBX__CG_NONE && cg.dir[0] == NULL && cg.procs[0] == NULL);

	/* Only what is asked for is written, and swap only where it exists. */
	struct sbx__cg_limits mem_only = { .memory = 1536 * MIB };
	name_of(name, 2);
	fake_v2_run(name, false);
	snprintf(dir, sizeof dir, "%s/svc/%s", tree, name);
	ck_assert_msg(sbx__cg_create(&caps, name, &mem_only, &cg, &err) == 0, "%s", err.message);
	assert_file(dir, "memory.max", "1610612736\n");
	assert_file(dir, "memory.swap.max", "<missing>");
	assert_file(dir, "pids.max", "max\n");
	assert_file(dir, "cpu.max", "max 100000\n");
	sbx__cg_destroy(&cg);

	/* A missing interface file fails with its name and the value, and
	 * never creates the file. */
	name_of(name, 3);
	fake_v2_run(name, true);
	snprintf(dir, sizeof dir, "%s/svc/%s/pids.max", tree, name);
	unlink(dir);
	ck_assert_int_eq(sbx__cg_create(&caps, name, &lim, &cg, &err), -ENOENT);
	ck_assert_msg(strstr(err.message, "cannot write \"20\" to ") && strstr(err.message, dir),
	              "%s", err.message);
	ck_assert(!exists(dir));
	ck_assert(cg.version == SBX__CG_NONE && cg.dir[0] == NULL);

	/* A directory create made itself is removed again on failure. */
	name_of(name, 4);
	snprintf(dir, sizeof dir, "%s/svc/%s", tree, name);
	ck_assert_int_eq(sbx__cg_create(&caps, name, &lim, &cg, &err), -ENOENT);
	ck_assert_msg(strstr(err.message, "memory.max"), "%s", err.message);
	ck_assert_msg(!exists(dir), "%s left behind", dir);

	/* One that holds processes is not taken over. */
	name_of(name, 5);
	fake_v2_run(name, true);
	snprintf(dir, sizeof dir, "svc/%s/cgroup.procs", name);
	put(tree, dir, "4242\n");
	ck_assert_int_eq(sbx__cg_create(&caps, name, &lim, &cg, &err), -EEXIST);
	ck_assert_msg(strstr(err.message, "holds processes"), "%s", err.message);
	sbx__cg_caps_free(&caps);
}
END_TEST

/* ------------------------------------------- fake v2: stats, kill, empty */

START_TEST(fake_v2_stats)
{
	struct sbx__cg_caps caps;
	struct sbx__cg cg;
	struct sbx__cg_stats st;
	struct sbx__cg_limits none = {0};
	sbx_error err = {0};
	char name[64], rel[PATH_MAX];

	fake_v2("memory pids cpu\n", true);
	probe_tree(&caps);
	name_of(name, 1);
	fake_v2_run(name, true);
	ck_assert_msg(sbx__cg_create(&caps, name, &none, &cg, &err) == 0, "%s", err.message);

	snprintf(rel, sizeof rel, "svc/%s/memory.peak", name);
	put(tree, rel, "12345678\n");
	snprintf(rel, sizeof rel, "svc/%s/memory.events", name);
	put(tree, rel, "low 0\nhigh 0\nmax 7\noom 1\noom_kill 1\noom_group_kill 0\n");
	snprintf(rel, sizeof rel, "svc/%s/pids.events", name);
	put(tree, rel, "max 3\n");
	snprintf(rel, sizeof rel, "svc/%s/cpu.stat", name);
	put(tree, rel, "usage_usec 3500000\nuser_usec 2500000\nsystem_usec 1000000\n"
	               "nr_periods 0\nnr_throttled 0\nthrottled_usec 0\n");
	ck_assert_int_eq(sbx__cg_stats(&cg, &st), 0);
	ck_assert_int_eq(st.peak_memory, 12345678);
	ck_assert(st.oom_killed);
	ck_assert(st.pids_max);
	ck_assert_double_eq_tol(st.cpu_user, 2.5, 1e-9);
	ck_assert_double_eq_tol(st.cpu_system, 1.0, 1e-9);

	/* Before Linux 5.19 there is no memory.peak; an OOM without a kill and
	 * a "max" line of memory.events are no verdicts. */
	snprintf(rel, sizeof rel, "%s/svc/%s/memory.peak", tree, name);
	unlink(rel);
	snprintf(rel, sizeof rel, "svc/%s/memory.events", name);
	put(tree, rel, "low 0\nhigh 0\nmax 7\noom 1\noom_kill 0\n");
	snprintf(rel, sizeof rel, "svc/%s/pids.events", name);
	put(tree, rel, "max 0\n");
	ck_assert_int_eq(sbx__cg_stats(&cg, &st), 0);
	ck_assert_int_eq(st.peak_memory, -1);
	ck_assert(!st.oom_killed);
	ck_assert(!st.pids_max);
	sbx__cg_destroy(&cg);

	/* No cgroup: everything unknown. */
	ck_assert_int_eq(sbx__cg_stats(&cg, &st), 0);
	ck_assert_int_eq(st.peak_memory, -1);
	ck_assert(st.cpu_user < 0 && st.cpu_system < 0);
	sbx__cg_caps_free(&caps);
}
END_TEST

START_TEST(fake_v2_kill_empty)
{
	struct sbx__cg_caps caps;
	struct sbx__cg cg;
	struct sbx__cg_limits none = {0};
	sbx_error err = {0};
	char name[64], rel[PATH_MAX], dir[256];

	fake_v2("memory pids cpu\n", true);
	probe_tree(&caps);
	name_of(name, 1);
	fake_v2_run(name, true);
	snprintf(dir, sizeof dir, "%s/svc/%s", tree, name);
	ck_assert_msg(sbx__cg_create(&caps, name, &none, &cg, &err) == 0, "%s", err.message);

	snprintf(rel, sizeof rel, "svc/%s/cgroup.events", name);
	put(tree, rel, "populated 1\nfrozen 0\n");
	ck_assert(!sbx__cg_empty(&cg));
	ck_assert_int_eq(sbx__cg_kill(&cg), 0);
	assert_file(dir, "cgroup.kill", "1\n");
	put(tree, rel, "populated 0\nfrozen 0\n");
	ck_assert(sbx__cg_empty(&cg));

	/* Before Linux 5.14 (no cgroup.kill, no cgroup.events): cgroup.procs
	 * is read instead.  It lists nobody here: a fake tree must not name
	 * real processes to kill. */
	snprintf(rel, sizeof rel, "%s/cgroup.kill", dir);
	unlink(rel);
	snprintf(rel, sizeof rel, "%s/cgroup.events", dir);
	unlink(rel);
	ck_assert(sbx__cg_empty(&cg));
	ck_assert_int_eq(sbx__cg_kill(&cg), 0);
	assert_file(dir, "cgroup.kill", "<missing>");
	put(dir, "cgroup.procs", "4242\n");
	ck_assert(!sbx__cg_empty(&cg));
	put(dir, "cgroup.procs", "");
	sbx__cg_destroy(&cg);
	sbx__cg_caps_free(&caps);
}
END_TEST

START_TEST(fake_reclaim)
{
	struct sbx__cg_caps caps;
	char dead[64], ours[64], live[64], badseq[64];
	pid_t pid = dead_pid();

	fake_v2("memory pids cpu\n", true);
	probe_tree(&caps);
	ck_assert(caps.version == SBX__CG_V2);
	/* Stale cgroups on a real file system hold only interface files, which
	 * rmdir ignores; in the fake tree they are empty directories. */
	snprintf(dead, sizeof dead, "svc/sbx-%d-1", (int)pid);
	snprintf(ours, sizeof ours, "svc/sbx-%d-1", (int)getpid());
	snprintf(live, sizeof live, "svc/sbx-%d-1", (int)getppid());
	snprintf(badseq, sizeof badseq, "svc/sbx-%d-x", (int)pid);
	const char *keep[] = { ours, live, badseq, "svc/other", "svc/sbx-12x-1", "svc/sbx--1" };
	mkdirs(tree_path(dead));
	for (size_t i = 0; i < SBX__ARRAY_LEN(keep); i++)
		mkdirs(tree_path(keep[i]));

	sbx__cg_reclaim(&caps);
	ck_assert_msg(!exists(tree_path(dead)), "%s was not reclaimed", dead);
	for (size_t i = 0; i < SBX__ARRAY_LEN(keep); i++)
		ck_assert_msg(exists(tree_path(keep[i])), "%s was removed", keep[i]);
	sbx__cg_caps_free(&caps);
}
END_TEST

/* --------------------------------------------------------- fake v1 tree */

/* A hybrid host as older systemd made it: v2 with no controllers at
 * ROOT/unified, cpu and cpuacct mounted together with links named after
 * each, and this process's memory cgroup at /a/b. */
static void fake_v1(const char *memory_path)
{
	char self[256];
	put(tree, "unified/cgroup.controllers", "");
	put(tree, "unified/cgroup.subtree_control", "");
	put(tree, "memory/a/b/cgroup.procs", "");
	put(tree, "memory/a/b/memory.memsw.limit_in_bytes", "9223372036854771712\n");
	put(tree, "pids/cgroup.procs", "");
	put(tree, "cpu,cpuacct/cgroup.procs", "");
	put(tree, "cpu,cpuacct/cpu.cfs_quota_us", "-1\n");
	put(tree, "cpu,cpuacct/cpuacct.usage", "0\n");
	ck_assert_int_eq(symlink("cpu,cpuacct", tree_path("cpu")), 0);
	ck_assert_int_eq(symlink("cpu,cpuacct", tree_path("cpuacct")), 0);
	snprintf(self, sizeof self, "12:pids:/\n6:cpu,cpuacct:/\n4:memory:%s\n1:name=systemd:/\n0::/\n",
	         memory_path);
	put(tree, "self", self);
}

/* What the kernel makes with a v1 run directory |name| in each hierarchy. */
static void fake_v1_run(const char *name)
{
	static const char *const files[][2] = {
		{ "memory/a/b/%s/cgroup.procs", "" },
		{ "memory/a/b/%s/memory.limit_in_bytes", "9223372036854771712\n" },
		{ "memory/a/b/%s/memory.memsw.limit_in_bytes", "9223372036854771712\n" },
		{ "memory/a/b/%s/memory.max_usage_in_bytes", "50000000\n" },
		{ "memory/a/b/%s/memory.memsw.max_usage_in_bytes", "50001000\n" },
		{ "memory/a/b/%s/memory.oom_control", "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n" },
		{ "pids/%s/cgroup.procs", "" },
		{ "pids/%s/pids.max", "max\n" },
		{ "pids/%s/pids.events", "max 0\n" },
		{ "cpu,cpuacct/%s/cgroup.procs", "" },
		{ "cpu,cpuacct/%s/cpu.cfs_period_us", "100000\n" },
		{ "cpu,cpuacct/%s/cpu.cfs_quota_us", "-1\n" },
		{ "cpu,cpuacct/%s/cpuacct.usage", "1750000000\n" },
		{ "cpu,cpuacct/%s/cpuacct.usage_user", "1500000000\n" },
		{ "cpu,cpuacct/%s/cpuacct.usage_sys", "250000000\n" },
	};
	char rel[PATH_MAX];
	for (size_t i = 0; i < SBX__ARRAY_LEN(files); i++) {
		snprintf(rel, sizeof rel, files[i][0], name);
		put(tree, rel, files[i][1]);
	}
}

START_TEST(fake_v1_hybrid)
{
	struct sbx__cg_caps caps;
	struct sbx__cg cg;
	struct sbx__cg_stats st;
	sbx_error err = {0};
	char name[64], mem[PATH_MAX], pids[PATH_MAX], cpu[PATH_MAX];
	struct sbx__cg_limits lim = { .memory = 64 * MIB, .cpus = 0.5, .processes = 20 };

	fake_v1("/a/b");
	probe_tree(&caps);
	ck_assert_msg(caps.version == SBX__CG_V1, "not v1: %s", caps.why);
	for (int i = 0; i < SBX__CG_NCTRL; i++)
		ck_assert_msg(caps.ctrl[i], "controller %d: %s", i, caps.why);
	ck_assert(caps.memory_swap);
	ck_assert_str_eq(caps.parent[SBX__CG_MEMORY], tree_path("memory/a/b"));
	ck_assert_str_eq(caps.parent[SBX__CG_PIDS], tree_path("pids"));
	ck_assert_str_eq(caps.parent[SBX__CG_CPU], tree_path("cpu"));
	/* Mounted with cpu, cpuacct needs no directory of its own. */
	ck_assert_ptr_null(caps.parent[SBX__CG_CPUACCT]);
	/* Why v2 is not used is said even when v1 serves. */
	assert_why(&caps, "no delegated cgroup v2 subtree: this process's cgroup / lists no "
	                  "controllers in");

	name_of(name, 1);
	fake_v1_run(name);
	ck_assert_msg(sbx__cg_create(&caps, name, &lim, &cg, &err) == 0, "%s", err.message);
	ck_assert(cg.version == SBX__CG_V1);
	snprintf(mem, sizeof mem, "%s/memory/a/b/%s", tree, name);
	snprintf(pids, sizeof pids, "%s/pids/%s", tree, name);
	snprintf(cpu, sizeof cpu, "%s/cpu/%s", tree, name);
	ck_assert_str_eq(cg.dir[SBX__CG_MEMORY], mem);
	ck_assert_str_eq(cg.dir[SBX__CG_PIDS], pids);
	ck_assert_str_eq(cg.dir[SBX__CG_CPU], cpu);
	ck_assert_ptr_null(cg.dir[SBX__CG_CPUACCT]);
	assert_file(mem, "memory.limit_in_bytes", "67108864\n");
	assert_file(mem, "memory.memsw.limit_in_bytes", "67108864\n");
	assert_file(pids, "pids.max", "20\n");
	assert_file(cpu, "cpu.cfs_period_us", "100000\n");
	assert_file(cpu, "cpu.cfs_quota_us", "50000\n");
	ck_assert_int_eq(sbx__cg_enter(&cg), 0);
	assert_file(mem, "cgroup.procs", "0\n");
	assert_file(pids, "cgroup.procs", "0\n");
	assert_file(cpu, "cgroup.procs", "0\n");
	ck_assert_int_eq(sbx__cg_stats(&cg, &st), 0);
	ck_assert_int_eq(st.peak_memory, 50001000);
	ck_assert(st.oom_killed);
	ck_assert(!st.pids_max);
	ck_assert_double_eq_tol(st.cpu_user, 1.5, 1e-9);
	ck_assert_double_eq_tol(st.cpu_system, 0.25, 1e-9);
	sbx__cg_destroy(&cg);

	/* Processes only: memory is still made, for the peak, and cpu for the
	 * cpu time, both without limits; pids gets its own. */
	struct sbx__cg_limits procs_only = { .processes = 5 };
	name_of(name, 2);
	fake_v1_run(name);
	ck_assert_msg(sbx__cg_create(&caps, name, &procs_only, &cg, &err) == 0, "%s", err.message);
	ck_assert_ptr_nonnull(cg.dir[SBX__CG_MEMORY]);
	ck_assert_ptr_nonnull(cg.dir[SBX__CG_CPU]);
	assert_file(cg.dir[SBX__CG_MEMORY], "memory.limit_in_bytes", "9223372036854771712\n");
	assert_file(cg.dir[SBX__CG_PIDS], "pids.max", "5\n");
	assert_file(cg.dir[SBX__CG_CPU], "cpu.cfs_quota_us", "-1\n");
	sbx__cg_destroy(&cg);
	sbx__cg_caps_free(&caps);
}
END_TEST

START_TEST(fake_v1_partial)
{
	struct sbx__cg_caps caps;
	struct sbx__cg cg;
	sbx_error err = {0};
	struct sbx__cg_limits mem = { .memory = 64 * MIB };

	fake_v1("/gone");
	unlink(tree_path("cpu,cpuacct/cpu.cfs_quota_us"));
	probe_tree(&caps);
	ck_assert_msg(caps.version == SBX__CG_V1, "not v1: %s", caps.why);
	ck_assert(!caps.ctrl[SBX__CG_MEMORY]);
	ck_assert(caps.ctrl[SBX__CG_PIDS]);
	ck_assert(!caps.ctrl[SBX__CG_CPU]);
	ck_assert_ptr_null(caps.parent[SBX__CG_MEMORY]);
	assert_why(&caps, "no cgroup v1 memory: ");
	assert_why(&caps, "memory/gone does not exist");
	assert_why(&caps, "has no cpu.cfs_quota_us");

	/* A limit asked of an unusable controller is an error, never dropped. */
	ck_assert_int_eq(sbx__cg_create(&caps, "sbx-1-1", &mem, &cg, &err), -EOPNOTSUPP);
	ck_assert_msg(strstr(err.message, "memory cannot be limited by a cgroup here"), "%s",
	              err.message);
	ck_assert(cg.version == SBX__CG_NONE);
	sbx__cg_caps_free(&caps);
}
END_TEST

/* ------------------------------------------------------------- bad input */

static int count_entries(const char *dir)
{
	int n = 0;
	DIR *d = opendir(dir);
	ck_assert_ptr_nonnull(d);
	while (readdir(d))
		n++;
	closedir(d);
	return n;
}

START_TEST(bad_names)
{
	static const char *const bad[] = { "", ".", "..", "a/b", "../x", "sbx-..-1", "/abs",
		                           "sbx-1-1/" };
	struct sbx__cg_caps caps;
	struct sbx__cg cg;
	sbx_error err = {0};
	struct sbx__cg_limits lim = { .memory = 64 * MIB };

	fake_v2("memory pids cpu\n", true);
	probe_tree(&caps);
	int before = count_entries(tree_path("svc"));
	for (size_t i = 0; i < SBX__ARRAY_LEN(bad); i++) {
		memset(&err, 0, sizeof err);
		ck_assert_int_eq(sbx__cg_create(&caps, bad[i], &lim, &cg, &err), -EINVAL);
		ck_assert_msg(strstr(err.message, "is not a single path component"), "%s",
		              err.message);
		ck_assert(cg.version == SBX__CG_NONE);
	}
	ck_assert_int_eq(count_entries(tree_path("svc")), before);
	ck_assert_int_eq(count_entries(tree), 6);

	/* Below the kernel's smallest quota (1 ms per 100 ms). */
	struct sbx__cg_limits tiny = { .cpus = 0.001 };
	ck_assert_int_eq(sbx__cg_create(&caps, "sbx-1-1", &tiny, &cg, &err), -EINVAL);
	ck_assert_msg(strstr(err.message, "cpus 0.001"), "%s", err.message);
	ck_assert_int_eq(count_entries(tree_path("svc")), before);

	/* No cgroup at all: said, not a crash. */
	struct sbx__cg_caps none = { .version = SBX__CG_NONE, .why = "no cgroup here" };
	ck_assert_int_eq(sbx__cg_create(&none, "sbx-1-1", &lim, &cg, &err), -EOPNOTSUPP);
	ck_assert_msg(strstr(err.message, "no cgroup here"), "%s", err.message);
	sbx__cg_caps_free(&caps);
}
END_TEST

/* ------------------------------------------------------------- real v1 */

/* The machine's cgroups, or false (the test passes, saying it skipped)
 * when this is not root with writable cgroup v1 memory and pids. */
static bool real_caps(struct sbx__cg_caps *caps)
{
	if (geteuid() != 0) {
		fprintf(stderr, "SKIP %s: not root\n", tcase_name());
		memset(caps, 0, sizeof *caps);
		return false;
	}
	sbx__cg_probe("/sys/fs/cgroup", "/proc/self/cgroup", caps);
	if (caps->version != SBX__CG_V1 || !caps->ctrl[SBX__CG_MEMORY] ||
	    !caps->ctrl[SBX__CG_PIDS]) {
		fprintf(stderr, "SKIP %s: no writable cgroup v1 memory and pids: %s\n", tcase_name(),
		        caps->why);
		sbx__cg_caps_free(caps);
		return false;
	}
	return true;
}

/* Forks a child that joins |cg| and then returns |fn|(|arg|) as its exit
 * status (100: could not join). */
static pid_t child_in(const struct sbx__cg *cg, int (*fn)(void *), void *arg)
{
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		if (sbx__cg_enter(cg) != 0)
			_exit(100);
		_exit(fn(arg));
	}
	return pid;
}

static int count_procs(const char *dir)
{
	const char *text = slurp(dir, "cgroup.procs");
	int n = 0;
	for (const char *p = text; *p; p++)
		n += *p == '\n';
	return n;
}

static void create_real(const struct sbx__cg_caps *caps, int seq,
                        const struct sbx__cg_limits *lim, struct sbx__cg *cg)
{
	char name[64];
	sbx_error err = {0};
	name_of(name, seq);
	ck_assert_msg(sbx__cg_create(caps, name, lim, cg, &err) == 0, "%s", err.message);
}

/* Whether |cg| empties within |ms|. */
static bool empties(const struct sbx__cg *cg, int ms)
{
	for (int waited = 0; waited <= ms; waited += 10) {
		if (sbx__cg_empty(cg))
			return true;
		sleep_ms(10);
	}
	return false;
}

/* Destroys |cg| and checks every directory of it is gone. */
static void destroy_real(struct sbx__cg *cg)
{
	char dirs[SBX__CG_NDIR][PATH_MAX];
	for (int i = 0; i < SBX__CG_NDIR; i++)
		snprintf(dirs[i], PATH_MAX, "%s", cg->dir[i] ? cg->dir[i] : "");
	sbx__cg_destroy(cg);
	for (int i = 0; i < SBX__CG_NDIR; i++)
		ck_assert_msg(!dirs[i][0] || !exists(dirs[i]), "%s remains", dirs[i]);
}

START_TEST(real_probe)
{
	struct sbx__cg_caps caps;
	if (!real_caps(&caps))
		return;
	ck_assert_msg(caps.ctrl[SBX__CG_CPU], "%s", caps.why);
	ck_assert_msg(caps.memory_swap, "%s", caps.why);
	for (int i = 0; i < SBX__CG_NCTRL; i++)
		ck_assert_msg(strncmp(caps.parent[i], "/sys/fs/cgroup/", 15) == 0, "%s",
		              caps.parent[i]);
	/* Below this process's own memory cgroup, wherever that is. */
	const char *self = slurp("/proc/self", "cgroup"), *line = strstr(self, ":memory:");
	ck_assert_ptr_nonnull(line);
	char path[PATH_MAX];
	snprintf(path, sizeof path, "/sys/fs/cgroup/memory%.*s", (int)strcspn(line + 8, "\n"),
	         line + 8);
	if (strcmp(path, "/sys/fs/cgroup/memory/") == 0)
		path[strlen(path) - 1] = '\0';
	ck_assert_str_eq(caps.parent[SBX__CG_MEMORY], path);
	sbx__cg_caps_free(&caps);
}
END_TEST

static int touch_memory(void *arg)
{
	(void)arg;
	for (int i = 0; i < 256; i++) {
		char *p = malloc(MIB);
		if (!p)
			return 2;
		memset(p, 1, MIB);
	}
	return 0;
}

START_TEST(real_memory_oom)
{
	struct sbx__cg_caps caps;
	struct sbx__cg cg;
	struct sbx__cg_stats st;
	struct sbx__cg_limits lim = { .memory = 64 * MIB, .cpus = 0.5, .processes = 20 };
	int status;
	if (!real_caps(&caps))
		return;
	create_real(&caps, 1, &lim, &cg);
	assert_file(cg.dir[SBX__CG_MEMORY], "memory.limit_in_bytes", "67108864\n");
	assert_file(cg.dir[SBX__CG_MEMORY], "memory.memsw.limit_in_bytes", "67108864\n");

	pid_t pid = child_in(&cg, touch_memory, NULL);
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert_msg(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL,
	              "the 256 MiB child was not killed: status 0x%x", status);
	ck_assert_int_eq(sbx__cg_stats(&cg, &st), 0);
	ck_assert(st.oom_killed);
	ck_assert(!st.pids_max);
	ck_assert_msg(st.peak_memory >= 32 * MIB && st.peak_memory <= 70 * MIB,
	              "peak %lld bytes", (long long)st.peak_memory);
	ck_assert_msg(st.cpu_user >= 0 && st.cpu_system >= 0, "cpu %g %g", st.cpu_user,
	              st.cpu_system);
	destroy_real(&cg);
	sbx__cg_caps_free(&caps);
}
END_TEST

static int spin(void *arg)
{
	(void)arg;
	for (volatile unsigned long i = 0;; i++)
		;
	return 0;
}

START_TEST(real_cpu_quota)
{
	struct sbx__cg_caps caps;
	struct sbx__cg cg;
	struct sbx__cg_stats st0, st;
	struct sbx__cg_limits lim = { .cpus = 0.5 };
	int status;
	if (!real_caps(&caps))
		return;
	if (!caps.ctrl[SBX__CG_CPU]) {
		fprintf(stderr, "SKIP %s: %s\n", tcase_name(), caps.why);
		sbx__cg_caps_free(&caps);
		return;
	}
	create_real(&caps, 2, &lim, &cg);
	assert_file(cg.dir[SBX__CG_CPU], "cpu.cfs_quota_us", "50000\n");
	assert_file(cg.dir[SBX__CG_CPU], "cpu.cfs_period_us", "100000\n");

	/* Half a core, measured by cpuacct over a second once it runs (the
	 * first period can give more), with room below for a busy machine:
	 * the upper bound is the limit, the lower one that time is counted. */
	pid_t pid = child_in(&cg, spin, NULL);
	sleep_ms(300);
	ck_assert_int_eq(sbx__cg_stats(&cg, &st0), 0);
	double t0 = now();
	sleep_ms(1000);
	ck_assert_int_eq(sbx__cg_stats(&cg, &st), 0);
	double wall = now() - t0;
	ck_assert_int_eq(sbx__cg_kill(&cg), 0);
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
	ck_assert_msg(st0.cpu_user >= 0 && st.cpu_system >= 0, "no cpu time: %s", caps.why);
	double cpu = st.cpu_user + st.cpu_system - st0.cpu_user - st0.cpu_system;
	ck_assert_msg(cpu / wall > 0.15 && cpu / wall < 0.65, "spun %.3f of a core (%.3f s in %.3f s)",
	              cpu / wall, cpu, wall);
	destroy_real(&cg);
	sbx__cg_caps_free(&caps);
}
END_TEST

/* Forks until refused, at most 50 times; the children wait to be killed.
 * Reports 'y' (a fork failed with EAGAIN) or 'n' on fd |*arg|, then waits. */
static int fork_many(void *arg)
{
	int fd = *(int *)arg;
	char verdict = 'n';
	for (int i = 0; i < 50; i++) {
		pid_t pid = fork();
		if (pid == 0) {
			for (;;)
				pause();
		}
		if (pid < 0) {
			verdict = errno == EAGAIN ? 'y' : 'e';
			break;
		}
	}
	if (write(fd, &verdict, 1) != 1)
		return 3;
	for (;;)
		pause();
	return 0;
}

START_TEST(real_pids)
{
	struct sbx__cg_caps caps;
	struct sbx__cg cg;
	struct sbx__cg_stats st;
	struct sbx__cg_limits lim = { .processes = 20 };
	int status, p[2];
	char verdict = 0;
	if (!real_caps(&caps))
		return;
	create_real(&caps, 3, &lim, &cg);
	ck_assert_int_eq(pipe(p), 0);
	pid_t pid = child_in(&cg, fork_many, &p[1]);
	close(p[1]);
	ck_assert_int_eq(read(p[0], &verdict, 1), 1);
	close(p[0]);
	ck_assert_msg(verdict == 'y', "forking 50 times was not refused with EAGAIN (%c)", verdict);
	ck_assert_int_eq(count_procs(cg.dir[SBX__CG_PIDS]), 20);
	ck_assert_int_eq(sbx__cg_stats(&cg, &st), 0);
	ck_assert(st.pids_max);
	ck_assert(!st.oom_killed);

	ck_assert_int_eq(sbx__cg_kill(&cg), 0);
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
	ck_assert_msg(empties(&cg, 2000), "still %d processes",
	              count_procs(cg.dir[SBX__CG_PIDS]));
	destroy_real(&cg);
	sbx__cg_caps_free(&caps);
}
END_TEST

static int sleep_tree(void *arg)
{
	(void)arg;
	execl("/bin/sh", "sh", "-c", "sleep 100 & sleep 100 & wait", (char *)NULL);
	return 127;
}

/* Waits until |dir| holds |n| processes. */
static void wait_procs(const char *dir, int n)
{
	for (int waited = 0; count_procs(dir) != n; waited += 10) {
		ck_assert_msg(waited < 5000, "%s holds %d processes, not %d", dir, count_procs(dir), n);
		sleep_ms(10);
	}
}

START_TEST(real_kill_tree)
{
	struct sbx__cg_caps caps;
	struct sbx__cg cg;
	struct sbx__cg_limits lim = { .memory = 64 * MIB, .processes = 20 };
	int status;
	if (!real_caps(&caps))
		return;
	create_real(&caps, 4, &lim, &cg);
	pid_t pid = child_in(&cg, sleep_tree, NULL);
	wait_procs(cg.dir[SBX__CG_MEMORY], 3);
	wait_procs(cg.dir[SBX__CG_PIDS], 3);
	ck_assert(!sbx__cg_empty(&cg));

	ck_assert_int_eq(sbx__cg_kill(&cg), 0);
	/* Our child is a zombie until reaped, and is not listed as one. */
	ck_assert_msg(empties(&cg, 2000), "still %d processes",
	              count_procs(cg.dir[SBX__CG_MEMORY]));
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
	/* The test process itself, outside, is untouched. */
	destroy_real(&cg);
	sbx__cg_caps_free(&caps);
}
END_TEST

START_TEST(real_destroy)
{
	struct sbx__cg_caps caps;
	struct sbx__cg cg;
	struct sbx__cg_limits lim = { .memory = 64 * MIB, .cpus = 1, .processes = 20 };
	int status;
	if (!real_caps(&caps))
		return;
	create_real(&caps, 5, &lim, &cg);
	int ndirs = 0;
	for (int i = 0; i < SBX__CG_NDIR; i++)
		ndirs += cg.dir[i] != NULL;
	ck_assert_int_ge(ndirs, 2);
	/* Destroy kills what is still inside before removing. */
	pid_t pid = child_in(&cg, sleep_tree, NULL);
	wait_procs(cg.dir[SBX__CG_MEMORY], 3);
	destroy_real(&cg);
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
	sbx__cg_caps_free(&caps);
}
END_TEST

static int sleep_long(void *arg)
{
	(void)arg;
	for (;;)
		pause();
	return 0;
}

START_TEST(real_reclaim)
{
	struct sbx__cg_caps caps;
	char stale[SBX__CG_NDIR][PATH_MAX], live[PATH_MAX], procs[PATH_MAX + 16];
	int status;
	if (!real_caps(&caps))
		return;
	pid_t dead = dead_pid();
	/* A dead supervisor's run, with a process still inside. */
	int nstale = 0;
	for (int i = 0; i < SBX__CG_NDIR; i++) {
		stale[i][0] = '\0';
		if (!caps.parent[i])
			continue;
		snprintf(stale[i], PATH_MAX, "%s/sbx-%d-7", caps.parent[i], (int)dead);
		ck_assert_msg(mkdir(stale[i], 0755) == 0, "mkdir %s: %s", stale[i], strerror(errno));
		nstale++;
	}
	ck_assert_int_ge(nstale, 2);
	struct sbx__cg inside = { .version = SBX__CG_V1 };
	snprintf(procs, sizeof procs, "%s/cgroup.procs", stale[SBX__CG_MEMORY]);
	inside.procs[0] = procs;
	pid_t pid = child_in(&inside, sleep_long, NULL);
	wait_procs(stale[SBX__CG_MEMORY], 1);
	/* A live supervisor's run, which stays. */
	snprintf(live, sizeof live, "%s/sbx-%d-7", caps.parent[SBX__CG_PIDS], (int)suite_pid);
	ck_assert_int_eq(mkdir(live, 0755), 0);

	sbx__cg_reclaim(&caps);
	for (int i = 0; i < SBX__CG_NDIR; i++)
		ck_assert_msg(!stale[i][0] || !exists(stale[i]), "%s was not reclaimed", stale[i]);
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
	ck_assert_msg(exists(live), "%s was removed", live);
	ck_assert_int_eq(rmdir(live), 0);
	sbx__cg_caps_free(&caps);
}
END_TEST

/* This process's directory in the controller-less v2 hierarchy of a
 * hybrid host, or "" (and a SKIP line) when there is none to use. */
static void unified_dir(char out[PATH_MAX])
{
	const char *self = slurp("/proc/self", "cgroup"), *line = strstr(self, "0::/");
	out[0] = '\0';
	if (geteuid() != 0 || !line || (line != self && line[-1] != '\n') ||
	    access("/sys/fs/cgroup/unified/cgroup.controllers", F_OK) != 0) {
		fprintf(stderr, "SKIP %s: not root, or no cgroup v2 hierarchy at "
		        "/sys/fs/cgroup/unified\n", tcase_name());
		return;
	}
	int len = (int)strcspn(line + 3, "\n");
	snprintf(out, PATH_MAX, "/sys/fs/cgroup/unified%.*s", len == 1 ? 0 : len, line + 3);
}

/*
 * The v2 mechanics the fake tree cannot show, on the real v2 hierarchy
 * this machine has without controllers: joining, cgroup.kill on a tree,
 * "populated" while our killed child is still unreaped, cpu.stat (which
 * every v2 cgroup has), and removal.  No limit can be set there.
 */
START_TEST(real_v2_core)
{
	struct sbx__cg_caps caps = { .version = SBX__CG_V2 };
	struct sbx__cg cg;
	struct sbx__cg_stats st;
	struct sbx__cg_limits none = {0};
	char dir[PATH_MAX];
	int status;
	unified_dir(dir);
	if (!dir[0])
		return;
	caps.parent[0] = strdup(dir);
	create_real(&caps, 6, &none, &cg);
	ck_assert(sbx__cg_empty(&cg));
	pid_t pid = child_in(&cg, sleep_tree, NULL);
	wait_procs(cg.dir[0], 3);
	ck_assert(!sbx__cg_empty(&cg));
	ck_assert_int_eq(sbx__cg_stats(&cg, &st), 0);
	ck_assert_msg(st.cpu_user >= 0 && st.cpu_system >= 0, "cpu %g %g", st.cpu_user,
	              st.cpu_system);
	ck_assert_int_eq(st.peak_memory, -1);
	ck_assert(!st.oom_killed && !st.pids_max);

	ck_assert_int_eq(sbx__cg_kill(&cg), 0);
	ck_assert_msg(empties(&cg, 2000), "still %d processes", count_procs(cg.dir[0]));
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
	destroy_real(&cg);
	sbx__cg_caps_free(&caps);
}
END_TEST

/* Last: no run cgroup named after this suite is left anywhere.  Those found
 * are removed, so a failed run does not litter the machine. */
START_TEST(real_nothing_left)
{
	struct sbx__cg_caps caps;
	char prefix[64], left[1024] = "", unified[PATH_MAX];
	if (!real_caps(&caps))
		return;
	snprintf(prefix, sizeof prefix, "sbx-%d-", (int)suite_pid);
	/* Every parent, and the v2 hierarchy real_v2_core used. */
	const char *parents[SBX__CG_NDIR + 1];
	for (int i = 0; i < SBX__CG_NDIR; i++)
		parents[i] = caps.parent[i];
	unified_dir(unified);
	parents[SBX__CG_NDIR] = unified[0] ? unified : NULL;
	for (size_t i = 0; i < SBX__ARRAY_LEN(parents); i++) {
		DIR *d = parents[i] ? opendir(parents[i]) : NULL;
		struct dirent *e;
		while (d && (e = readdir(d))) {
			if (strncmp(e->d_name, prefix, strlen(prefix)) != 0)
				continue;
			struct sbx__cg cg = { .version = i < SBX__CG_NDIR ? SBX__CG_V1 : SBX__CG_V2 };
			ck_assert_int_ge(asprintf(&cg.dir[0], "%s/%s", parents[i], e->d_name), 0);
			size_t len = strlen(left);
			snprintf(left + len, sizeof left - len, " %s", cg.dir[0]);
			sbx__cg_destroy(&cg);
		}
		if (d)
			closedir(d);
	}
	ck_assert_msg(left[0] == '\0', "left behind:%s", left);
	sbx__cg_caps_free(&caps);
}
END_TEST

/* ----------------------------------------------------------------- suite */

static Suite *cgroup_suite(void)
{
	Suite *s = suite_create("cgroup");
	TCase *tc = tcase_create("fake_v2");
	tcase_add_checked_fixture(tc, tree_setup, tree_teardown);
	tcase_set_timeout(tc, TIMEOUT);
	tcase_add_test(tc, fake_v2_delegated);
	tcase_add_test(tc, fake_v2_not_delegated);
	tcase_add_test(tc, fake_v2_missing_dir);
	tcase_add_test(tc, fake_v2_create);
	tcase_add_test(tc, fake_v2_stats);
	tcase_add_test(tc, fake_v2_kill_empty);
	tcase_add_test(tc, fake_reclaim);
	suite_add_tcase(s, tc);

	tc = tcase_create("fake_v1");
	tcase_add_checked_fixture(tc, tree_setup, tree_teardown);
	tcase_set_timeout(tc, TIMEOUT);
	tcase_add_test(tc, fake_v1_hybrid);
	tcase_add_test(tc, fake_v1_partial);
	suite_add_tcase(s, tc);

	tc = tcase_create("bad_input");
	tcase_add_checked_fixture(tc, tree_setup, tree_teardown);
	tcase_set_timeout(tc, TIMEOUT);
	tcase_add_test(tc, bad_names);
	suite_add_tcase(s, tc);

	/* Last, so that its final test sees what the others left. */
	tc = tcase_create("real_v1");
	tcase_set_timeout(tc, TIMEOUT);
	tcase_add_test(tc, real_probe);
	tcase_add_test(tc, real_memory_oom);
	tcase_add_test(tc, real_cpu_quota);
	tcase_add_test(tc, real_pids);
	tcase_add_test(tc, real_kill_tree);
	tcase_add_test(tc, real_destroy);
	tcase_add_test(tc, real_reclaim);
	tcase_add_test(tc, real_v2_core);
	tcase_add_test(tc, real_nothing_left);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	suite_pid = getpid();
	SRunner *sr = srunner_create(cgroup_suite());
	srunner_run_all(sr, CK_ENV);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
