/*
 * check_limits.c -- every limit against a program that abuses it, through the
 * whole library, on the backend named by $SBX_TEST_BACKEND (bwrap by
 * default, or passthrough).
 *
 * What is expected depends on what this machine allows, which is the point:
 * each test reads the mechanism the result reports and holds it to that.  A
 * cgroup must give its verdict; an rlimit must stop the program; a limit that
 * nothing enforces must be a warning that says why.  As root on our build
 * machines the cgroup v1 paths are taken for real; tests/unprivileged.sh runs
 * the suite again as a user without cgroups, where the fallbacks are.
 */
#include "testutil.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

/* ------------------------------------------------------------ helper modes */

static volatile int spinning = 1;
/* Where the touch helper keeps what it allocated. */
char *touched[8192];

static void *spin_thread(void *arg)
{
	(void)arg;
	volatile unsigned long x = 0;
	while (spinning)
		x++;
	return NULL;
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* "limits-helper MODE ARG": the abusive programs. */
static int limits_helper(const char *mode, const char *arg)
{
	if (strcmp(mode, "touch") == 0) {
		/* Touches ARG MiB, one at a time, and says how far it got.  The
		 * blocks stay reachable, so LeakSanitizer has nothing to say. */
		long mib = atol(arg);
		for (long i = 0; i < mib && i < 8192; i++) {
			char *p = malloc(1 << 20);
			if (!p) {
				printf("malloc failed at %ld MiB\n", i);
				return 3;
			}
			memset(p, 1, 1 << 20);
			touched[i] = p;
		}
		printf("touched %ld MiB\n", mib);
		return 0;
	}
	if (strcmp(mode, "spin-threads") == 0) {
		/* Four threads spin for ARG seconds of wall time. */
		pthread_t t[4];
		for (int i = 0; i < 4; i++)
			pthread_create(&t[i], NULL, spin_thread, NULL);
		double end = now_s() + atof(arg);
		while (now_s() < end)
			usleep(10000);
		spinning = 0;
		for (int i = 0; i < 4; i++)
			pthread_join(t[i], NULL);
		return 0;
	}
	if (strcmp(mode, "spin") == 0) {
		double end = now_s() + atof(arg);
		volatile unsigned long x = 0;
		while (now_s() < end)
			x++;
		return 0;
	}
	return 2;
}

/* Whether this binary (and so the helper) is built with AddressSanitizer. */
#if defined(__SANITIZE_ADDRESS__)
static const bool sanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
static const bool sanitized = true;
#else
static const bool sanitized = false;
#endif
#else
static const bool sanitized = false;
#endif

/*
 * Under valgrind the library's vfork-style child becomes a valgrind process,
 * and valgrind keeps resource limits (the fd limit above all) to itself, so
 * what the command sees of an rlimit is valgrind's, not ours.  Tests that
 * read an rlimit from inside skip there; the other configurations run them.
 */
#define SKIP_UNDER_VALGRIND()                                                      \
	do {                                                                       \
		if (tu_under_valgrind()) {                                          \
			fprintf(stderr, "skipped under valgrind: rlimits are its own\n"); \
			return;                                                    \
		}                                                                  \
	} while (0)

/* ------------------------------------------------------------ fixture */

static sbx_sandbox *sandbox;
static tu_call call;
static tu_cmd cmd;

static enum sbx_backend test_backend(void)
{
	const char *b = getenv("SBX_TEST_BACKEND");
	return b && strcmp(b, "passthrough") == 0 ? SBX_BACKEND_PASSTHROUGH : SBX_BACKEND_BWRAP;
}

static void limits_teardown(void)
{
	tu_call_done(&call);
	sbx_sandbox_free(sandbox);
	sandbox = NULL;
}

static void make_sandbox(sbx_policy *p)
{
	sbx_sandbox_options so;
	sbx_sandbox_options_init(&so);
	so.backend = test_backend();
	sbx_error err;
	int rc = sbx_sandbox_new(tu_base, p, &so, &sandbox, &err);
	ck_assert_msg(rc == 0, "sbx_sandbox_new: %s", err.message);
	sbx_policy_free(p);
}

static sbx_result *run_helper(const char *mode, const char *arg, double timeout)
{
	tu_call_done(&call);
	sbx_run_options o;
	sbx_run_options_init(&o);
	tu_helper(&o, &cmd, "limits", mode, arg);
	o.timeout = timeout;
	return tu_run(sandbox, &o, &call);
}

static sbx_result *run_shell(const char *line, double timeout)
{
	tu_call_done(&call);
	sbx_run_options o;
	sbx_run_options_init(&o);
	o.shell = line;
	o.timeout = timeout;
	return tu_run(sandbox, &o, &call);
}

static bool hit(const sbx_result *r, enum sbx_hit h)
{
	return (r->resources.limits_hit >> h) & 1u;
}

static bool warned(const sbx_result *r, const char *word)
{
	for (unsigned i = 0; i < r->resources.nwarnings; i++)
		if (strstr(r->resources.warnings[i], word))
			return true;
	return false;
}

static bool is_cgroup(enum sbx_mechanism m)
{
	return m == SBX_MECH_CGROUP_V1 || m == SBX_MECH_CGROUP_V2;
}

/* ------------------------------------------------------------ memory */

START_TEST(memory_bomb_is_stopped)
{
	sbx_policy *p = sbx_policy_new();
	ck_assert_int_eq(sbx_policy_set_memory(p, 64 << 20, NULL), 0);
	make_sandbox(p);
	long rss_before = tu_rss_kib();
	sbx_result *r = run_helper("touch", "1024", 30);
	enum sbx_mechanism m = r->resources.mechanisms[SBX_LIMIT_MEMORY];
	ck_assert_msg(!(r->exited && r->exit_code == 0), "a 1 GiB program ran to the end under 64M");
	ck_assert(!tu_contains(r->out[SBX_STDOUT].data, "touched 1024"));
	if (is_cgroup(m)) {
		ck_assert_msg(hit(r, SBX_HIT_MEMORY), "cgroup OOM kill without a memory verdict");
		ck_assert_int_eq(r->signal, SIGKILL);
		ck_assert_str_eq(r->resources.peak_memory_source, m == SBX_MECH_CGROUP_V2 ? "cgroup_v2" : "cgroup_v1");
		ck_assert_msg(r->resources.peak_memory_bytes > (40 << 20) &&
		              r->resources.peak_memory_bytes <= (66 << 20),
		              "peak %lld is not near 64 MiB", (long long)r->resources.peak_memory_bytes);
	} else {
		ck_assert_int_eq(m, SBX_MECH_RLIMIT);
		/* An AddressSanitizer build of the helper cannot even start under
		 * RLIMIT_AS (its shadow memory is address space); a plain one
		 * sees malloc fail. */
		if (!sanitized)
			ck_assert(tu_contains(r->out[SBX_STDOUT].data, "malloc failed"));
		ck_assert(warned(r, "RLIMIT_AS"));
	}
	/* The supervisor read and discarded nothing of that: its memory is flat. */
	ck_assert_int_lt(tu_rss_kib() - rss_before, 8 * 1024);
}
END_TEST

START_TEST(watchdog_kills_a_memory_bomb)
{
	sbx_policy *p = sbx_policy_new();
	ck_assert_int_eq(sbx_policy_set_memory(p, 64 << 20, NULL), 0);
	ck_assert_int_eq(sbx_policy_set_memory_strategy(p, SBX_MEMORY_WATCHDOG, NULL), 0);
	make_sandbox(p);
	sbx_result *r = run_helper("touch", "4096", 60);
	ck_assert_int_eq(r->resources.mechanisms[SBX_LIMIT_MEMORY], SBX_MECH_WATCHDOG);
	ck_assert(hit(r, SBX_HIT_MEMORY));
	ck_assert(!r->exited);
	ck_assert_str_eq(r->resources.peak_memory_source, "sampled");
	ck_assert_int_ge(r->resources.peak_memory_bytes, 64 << 20);
	ck_assert(warned(r, "watchdog"));
}
END_TEST

START_TEST(memory_strategy_none_says_so)
{
	sbx_policy *p = sbx_policy_new();
	ck_assert_int_eq(sbx_policy_set_memory(p, 64 << 20, NULL), 0);
	ck_assert_int_eq(sbx_policy_set_memory_strategy(p, SBX_MEMORY_NONE, NULL), 0);
	make_sandbox(p);
	sbx_result *r = run_helper("touch", "100", 30);
	ck_assert(r->exited && r->exit_code == 0);
	ck_assert_int_eq(r->resources.mechanisms[SBX_LIMIT_MEMORY], SBX_MECH_NONE);
	ck_assert(warned(r, "memory limit not enforced"));
}
END_TEST

/* ------------------------------------------------------------ processes */

START_TEST(fork_bomb_is_contained)
{
	sbx_policy *p = sbx_policy_new();
	ck_assert_int_eq(sbx_policy_set_processes(p, 50, NULL), 0);
	make_sandbox(p);
	/* Root without a pids cgroup has nothing to stop a fork bomb: RLIMIT_NPROC
	 * never applies to root.  Then the result must say so, and the bomb is
	 * not let loose on the machine. */
	sbx_result *probe = run_shell("true", 10);
	if (probe->resources.mechanisms[SBX_LIMIT_PROCESSES] == SBX_MECH_NONE) {
		ck_assert(warned(probe, "processes limit not enforced"));
		return;
	}
	/* The bomb and, at the same time, a normal run on the same loop. */
	tu_call bomb = { 0 }, normal = { 0 };
	sbx_run_options o;
	sbx_run_options_init(&o);
	o.shell = "f() { f | f & }; f; sleep 2";
	o.timeout = 5;
	tu_start(sandbox, &o, &bomb);
	sbx_run_options_init(&o);
	o.shell = "sleep 0.5; echo fine";
	tu_start(sandbox, &o, &normal);
	tu_wait(&normal);
	tu_wait(&bomb);
	sbx_result *r = bomb.result;
	enum sbx_mechanism m = r->resources.mechanisms[SBX_LIMIT_PROCESSES];
	if (is_cgroup(m)) {
		ck_assert_msg(hit(r, SBX_HIT_PROCESSES), "pids.max refused forks without a verdict");
		ck_assert_str_eq(normal.result->out[SBX_STDOUT].data, "fine\n");
	} else {
		/* RLIMIT_NPROC counts every process of the user, so a bomb can
		 * starve a concurrent run of the same user: the warning says
		 * so, and that is why a cgroup is preferred. */
		ck_assert_int_eq(m, SBX_MECH_RLIMIT);
		ck_assert(warned(r, "RLIMIT_NPROC"));
		ck_assert(warned(r, "other work of this user"));
	}
	/* The supervisor can still start processes. */
	tu_call after = { 0 };
	sbx_run_options_init(&o);
	o.shell = "echo still";
	tu_run(sandbox, &o, &after);
	ck_assert_str_eq(after.result->out[SBX_STDOUT].data, "still\n");
	tu_call_done(&after);
	tu_call_done(&bomb);
	tu_call_done(&normal);
}
END_TEST

/* ------------------------------------------------------------ cpu */

START_TEST(cpu_seconds_stops_a_threaded_spin)
{
	sbx_policy *p = sbx_policy_new();
	ck_assert_int_eq(sbx_policy_set_cpu_seconds(p, 1, NULL), 0);
	make_sandbox(p);
	sbx_result *r = run_helper("spin-threads", "20", 30);
	ck_assert_int_eq(r->resources.mechanisms[SBX_LIMIT_CPU_SECONDS], SBX_MECH_RLIMIT);
	ck_assert_msg(hit(r, SBX_HIT_CPU), "no cpu verdict: exit %d signal %d", r->exit_code, r->signal);
	ck_assert_int_eq(r->signal, SIGXCPU);
	/* Four threads on two cores reach a second of CPU in well under 20 s. */
	ck_assert_double_lt(r->resources.wall_seconds, 10);
}
END_TEST

START_TEST(cpus_half_a_core)
{
	sbx_policy *p = sbx_policy_new();
	ck_assert_int_eq(sbx_policy_set_cpus(p, 0.5, NULL), 0);
	make_sandbox(p);
	sbx_result *r = run_helper("spin", "3", 30);
	enum sbx_mechanism m = r->resources.mechanisms[SBX_LIMIT_CPUS];
	double cpu = r->resources.cpu_user_seconds + r->resources.cpu_system_seconds;
	if (is_cgroup(m)) {
		/* Three seconds of wall time at half a core: 1.5 s, give or take
		 * the scheduler's period and a noisy machine. */
		ck_assert_msg(cpu > 1.0 && cpu < 2.0, "a spin under --cpus 0.5 used %.2f s of 3 s", cpu);
	} else {
		ck_assert_int_eq(m, SBX_MECH_NONE);
		ck_assert(warned(r, "cpus limit not enforced"));
	}
}
END_TEST

/* ------------------------------------------------------------ files */

START_TEST(file_size_stops_a_large_write)
{
	char dir[] = "/var/tmp/sbx-limits-XXXXXX", line[256];
	ck_assert_ptr_nonnull(mkdtemp(dir));
	sbx_policy *p = sbx_policy_new();
	ck_assert_int_eq(sbx_policy_set_file_size(p, 1 << 20, NULL), 0);
	ck_assert_int_eq(sbx_policy_add_writable(p, dir, NULL), 0);
	make_sandbox(p);
	snprintf(line, sizeof line, "head -c 5000000 /dev/zero > %s/big", dir);
	sbx_result *r = run_shell(line, 20);
	ck_assert_int_eq(r->resources.mechanisms[SBX_LIMIT_FILE_SIZE], SBX_MECH_RLIMIT);
	ck_assert(!(r->exited && r->exit_code == 0));
	ck_assert_msg(hit(r, SBX_HIT_FILE_SIZE), "no file_size verdict: exit %d signal %d", r->exit_code,
	              r->signal);
	char path[128];
	snprintf(path, sizeof path, "%s/big", dir);
	struct stat st;
	ck_assert_int_eq(stat(path, &st), 0);
	ck_assert_int_le(st.st_size, 1 << 20);
	unlink(path);
	rmdir(dir);
}
END_TEST

START_TEST(a_programs_own_exit_status_is_no_verdict)
{
	/* 153 is 128+SIGXFSZ, but a program that exits 153 was not stopped
	 * by the file-size limit.  (Under bubblewrap an exit status above 128
	 * cannot be told from a signal; see sbx(1).) */
	if (test_backend() != SBX_BACKEND_PASSTHROUGH)
		return;
	sbx_policy *p = sbx_policy_new();
	ck_assert_int_eq(sbx_policy_set_file_size(p, 1 << 20, NULL), 0);
	ck_assert_int_eq(sbx_policy_set_cpu_seconds(p, 5, NULL), 0);
	make_sandbox(p);
	tu_call_done(&call);
	const char *argv[] = { "/bin/sh", "-c", "exit 153", NULL };
	sbx_run_options o;
	sbx_run_options_init(&o);
	o.argv = argv;
	sbx_result *r = tu_run(sandbox, &o, &call);
	ck_assert(r->exited);
	ck_assert_int_eq(r->exit_code, 153);
	ck_assert_uint_eq(r->resources.limits_hit, 0);
}
END_TEST

START_TEST(open_files_limit)
{
	SKIP_UNDER_VALGRIND();
	sbx_policy *p = sbx_policy_new();
	ck_assert_int_eq(sbx_policy_set_open_files(p, 64, NULL), 0);
	make_sandbox(p);
	sbx_result *r = run_shell("ulimit -n", 10);
	ck_assert_str_eq(r->out[SBX_STDOUT].data, "64\n");
	ck_assert_int_eq(r->resources.mechanisms[SBX_LIMIT_OPEN_FILES], SBX_MECH_RLIMIT);
}
END_TEST

START_TEST(core_dumps_off_by_default)
{
	make_sandbox(sbx_policy_new());
	sbx_result *r = run_shell("ulimit -c", 10);
	ck_assert_str_eq(r->out[SBX_STDOUT].data, "0\n");
	ck_assert_int_eq(r->resources.mechanisms[SBX_LIMIT_CORE_DUMPS], SBX_MECH_RLIMIT);
	ck_assert_int_eq(r->resources.mechanisms[SBX_LIMIT_MEMORY], SBX_MECH_UNSET);
}
END_TEST

/* ------------------------------------------------------------ honesty */

START_TEST(every_limit_is_enforced_or_a_warning)
{
	SKIP_UNDER_VALGRIND();
	sbx_policy *p = sbx_policy_new();
	sbx_policy_set_memory(p, 256 << 20, NULL);
	sbx_policy_set_cpus(p, 1, NULL);
	sbx_policy_set_cpu_seconds(p, 10, NULL);
	sbx_policy_set_processes(p, 100, NULL);
	sbx_policy_set_file_size(p, 10 << 20, NULL);
	sbx_policy_set_open_files(p, 256, NULL);
	make_sandbox(p);
	sbx_result *r = run_shell("true", 10);
	ck_assert_msg(r->exited && r->exit_code == 0, "%s", r->out[SBX_STDERR].data);
	for (int l = 0; l < SBX_LIMIT_COUNT; l++) {
		enum sbx_mechanism m = r->resources.mechanisms[l];
		ck_assert_msg(m != SBX_MECH_UNSET, "%s not reported", sbx_limit_name((enum sbx_limit)l));
		if (m == SBX_MECH_NONE)
			ck_assert_msg(warned(r, sbx_limit_name((enum sbx_limit)l)),
			              "%s is not enforced and no warning says so",
			              sbx_limit_name((enum sbx_limit)l));
	}
	if (getuid() != 0) {
		/* Without cgroups: every limit falls back, and says why. */
		ck_assert(!is_cgroup(r->resources.mechanisms[SBX_LIMIT_MEMORY]));
		ck_assert(warned(r, "cgroup"));
	}
}
END_TEST

/* No cgroup a run made remains: every run above removed its own. */
static bool any_run_cgroup_left(void)
{
	char cmd_line[256];
	snprintf(cmd_line, sizeof cmd_line,
	         "find /sys/fs/cgroup -maxdepth 4 -type d -name 'sbx-%d-*' 2>/dev/null | grep -q .",
	         (int)getpid());
	return system(cmd_line) == 0;
}

START_TEST(runs_leave_no_cgroup)
{
	sbx_policy *p = sbx_policy_new();
	sbx_policy_set_memory(p, 64 << 20, NULL);
	sbx_policy_set_processes(p, 20, NULL);
	make_sandbox(p);
	for (int i = 0; i < 3; i++)
		run_shell("sleep 0.1 & sleep 0.1", 10);
	run_shell("setsid sleep 30 & exit 0", 10);
	ck_assert_msg(!any_run_cgroup_left(), "a run left its cgroup behind");
}
END_TEST

static Suite *limits_suite(void)
{
	Suite *s = suite_create("limits");
	TCase *tc = tu_tcase("limits", 60);
	tcase_add_checked_fixture(tc, NULL, limits_teardown);
	tcase_add_test(tc, memory_bomb_is_stopped);
	tcase_add_test(tc, watchdog_kills_a_memory_bomb);
	tcase_add_test(tc, memory_strategy_none_says_so);
	tcase_add_test(tc, fork_bomb_is_contained);
	tcase_add_test(tc, cpu_seconds_stops_a_threaded_spin);
	tcase_add_test(tc, cpus_half_a_core);
	tcase_add_test(tc, file_size_stops_a_large_write);
	tcase_add_test(tc, a_programs_own_exit_status_is_no_verdict);
	tcase_add_test(tc, open_files_limit);
	tcase_add_test(tc, core_dumps_off_by_default);
	tcase_add_test(tc, every_limit_is_enforced_or_a_warning);
	tcase_add_test(tc, runs_leave_no_cgroup);
	suite_add_tcase(s, tc);
	return s;
}

int main(int argc, char **argv)
{
	if (argc > 3 && strcmp(argv[1], "--helper") == 0 && strcmp(argv[2], "limits") == 0)
		return limits_helper(argv[3], argc > 4 ? argv[4] : "");
	tu_init(argc, argv);
	return tu_run_suite(limits_suite());
}
