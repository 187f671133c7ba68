/*
 * check_watchdog.c -- the memory watchdog (lib/watchdog.c) against real
 * process trees: it catches a growing process and a tree whose sum (not any
 * one member) is over, follows members that come and go, never starts a
 * process, and leaves nothing behind on the loop or in the fd table.
 *
 * Every test runs in its own process (Check's fork mode) with a fresh
 * event_base; the fixture asserts at teardown that no event is left on the
 * base, that the fds are those of setup, and that no child is left
 * unreaped.  The watched processes are this binary re-run as
 * "check_watchdog --helper MODE ARG...": exec'd, so that under valgrind they
 * run natively and their memory is their own.  A helper reports through a
 * shared page it finds on fd 3, and dies with the test (PR_SET_PDEATHSIG).
 *
 * Modes:
 *   grow STEP_MIB MAX_MIB STEP_MS LIMIT_MIB   touches STEP_MIB every STEP_MS up
 *                                to MAX_MIB, noting when its own RSS first
 *                                exceeded LIMIT_MIB, then sleeps
 *   tree N MIB                   forks N children that each touch MIB and sleep
 *   churn SECONDS MIB            for SECONDS, keeps up to 4 children alive that
 *                                touch MIB, live 30 ms and exit; then exits 0
 *   orphan MIB                   forks a child that forks a grandchild and exits
 *                                at once; the grandchild touches MIB and sleeps
 *   threads N MIB                starts N threads that each touch MIB and sleep
 *   sleep                        sleeps
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* memfd_create */
#endif
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "internal.h"
#include "watchdog.h"

#define MIB (1024 * 1024)
#define TIMEOUT 30

/* What a helper tells the test, in a page both map. */
struct shared {
	int64_t rss;                 /* the helper's own resident bytes after its last step */
	double t_cross;              /* monotonic seconds when that first exceeded its limit */
	int ready;                   /* children that have touched their memory */
	int spawned;                 /* children forked so far */
	pid_t pids[8];               /* the children, for the tree mode */
};

static char self_path[PATH_MAX];

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Resident bytes of |pid| (0: this process) from its statm; -1 if gone. */
static int64_t rss_of(pid_t pid)
{
	char path[64];
	long size, resident;
	if (pid)
		snprintf(path, sizeof path, "/proc/%d/statm", (int)pid);
	else
		snprintf(path, sizeof path, "/proc/self/statm");
	FILE *f = fopen(path, "r");
	if (!f)
		return -1;
	int n = fscanf(f, "%ld %ld", &size, &resident);
	fclose(f);
	return n == 2 ? (int64_t)resident * sysconf(_SC_PAGESIZE) : -1;
}

/* ----------------------------------------------------------------- helpers */

/* Maps |bytes| of fresh memory and writes every page, so that it is resident. */
static void touch(size_t bytes)
{
	char *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		_exit(3);
	memset(p, 0x5a, bytes);
}

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

static void die_with_parent(void)
{
	prctl(PR_SET_PDEATHSIG, SIGKILL);
}

static struct shared *helper_page;
static size_t thread_bytes;

static void *thread_main(void *arg)
{
	touch(thread_bytes);
	__atomic_add_fetch(&helper_page->ready, 1, __ATOMIC_SEQ_CST);
	for (;;)
		pause();
	return NULL;
}

static int helper(int argc, char **argv)
{
	struct shared *sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED, 3, 0);
	if (sh == MAP_FAILED)
		return 2;
	const char *mode = argv[0];
	if (strcmp(mode, "grow") == 0 && argc == 5) {
		size_t step = (size_t)atol(argv[1]) * MIB, max = (size_t)atol(argv[2]) * MIB;
		long step_ms = atol(argv[3]);
		int64_t limit = (int64_t)atol(argv[4]) * MIB;
		for (size_t done = 0; done < max; done += step) {
			touch(step);
			sh->rss = rss_of(0);
			if (sh->rss > limit && sh->t_cross == 0)
				sh->t_cross = now();
			sleep_ms(step_ms);
		}
	} else if (strcmp(mode, "tree") == 0 && argc == 3) {
		int n = atoi(argv[1]);
		size_t bytes = (size_t)atol(argv[2]) * MIB;
		for (int i = 0; i < n && i < 8; i++) {
			pid_t pid = fork();
			if (pid == 0) {
				die_with_parent();
				touch(bytes);
				__atomic_add_fetch(&sh->ready, 1, __ATOMIC_SEQ_CST);
				for (;;)
					pause();
			}
			sh->pids[i] = pid;
			__atomic_add_fetch(&sh->spawned, 1, __ATOMIC_SEQ_CST);
		}
	} else if (strcmp(mode, "churn") == 0 && argc == 3) {
		double end = now() + atof(argv[1]);
		size_t bytes = (size_t)atol(argv[2]) * MIB;
		int alive = 0;
		while (now() < end) {
			while (alive >= 4 && waitpid(-1, NULL, 0) > 0)
				alive--;
			pid_t pid = fork();
			if (pid == 0) {
				touch(bytes);
				sleep_ms(30);
				_exit(0);
			}
			if (pid > 0) {
				alive++;
				__atomic_add_fetch(&sh->spawned, 1, __ATOMIC_SEQ_CST);
			}
			sleep_ms(8);
		}
		while (waitpid(-1, NULL, 0) > 0)
			;
		return 0;
	} else if (strcmp(mode, "orphan") == 0 && argc == 2) {
		size_t bytes = (size_t)atol(argv[1]) * MIB;
		pid_t child = fork();
		if (child == 0) {
			if (fork() == 0) {
				/* Its parent is gone at once, so it cannot die with it;
				 * the test kills the group, and this is the safety net. */
				alarm(60);
				sh->pids[0] = getpid();
				touch(bytes);
				__atomic_add_fetch(&sh->ready, 1, __ATOMIC_SEQ_CST);
				for (;;)
					pause();
			}
			_exit(0);
		}
		waitpid(child, NULL, 0);
	} else if (strcmp(mode, "threads") == 0 && argc == 3) {
		helper_page = sh;
		thread_bytes = (size_t)atol(argv[2]) * MIB;
		for (int i = atoi(argv[1]); i > 0; i--) {
			pthread_t t;
			if (pthread_create(&t, NULL, thread_main, NULL) != 0)
				return 2;
		}
	} else if (strcmp(mode, "sleep") != 0) {
		return 2;
	}
	for (;;)
		pause();
}

/* A running helper: its pid (a session and group leader) and its page. */
struct proc {
	pid_t pid;
	struct shared *sh;
};

/* Starts this binary as helper |mode| with up to four arguments. */
static struct proc start(const char *mode, const char *a1, const char *a2, const char *a3,
                         const char *a4)
{
	struct proc p;
	int fd = memfd_create("watchdog-test", MFD_CLOEXEC);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(ftruncate(fd, sizeof *p.sh), 0);
	p.sh = mmap(NULL, sizeof *p.sh, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	ck_assert_ptr_ne(p.sh, MAP_FAILED);
	char *argv[] = { self_path, (char *)"--helper", (char *)mode, (char *)a1, (char *)a2,
	                 (char *)a3, (char *)a4, NULL };
	p.pid = fork();
	ck_assert_int_ge(p.pid, 0);
	if (p.pid == 0) {
		setsid();
		die_with_parent();
		if (dup2(fd, 3) < 0)
			_exit(126);
		execv(self_path, argv);
		_exit(127);
	}
	close(fd);
	return p;
}

/* Kills the helper's whole group and reaps the helper. */
static void stop(struct proc *p)
{
	kill(-p->pid, SIGKILL);
	kill(p->pid, SIGKILL);
	ck_assert_int_eq(waitpid(p->pid, NULL, 0), p->pid);
	munmap(p->sh, sizeof *p->sh);
	p->pid = 0;
}

/* -------------------------------------------------------------- fixture */

static struct event_base *base;
static int fds_at_setup;

static int count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	int n = 0;
	struct dirent *e;
	ck_assert_ptr_nonnull(d);
	while ((e = readdir(d)))
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return n - 1; /* the directory's own fd */
}

/* The children of this process that /proc lists, into |out| (up to |max|). */
static int children(pid_t *out, int max)
{
	DIR *d = opendir("/proc");
	int n = 0;
	struct dirent *e;
	ck_assert_ptr_nonnull(d);
	while ((e = readdir(d))) {
		pid_t pid = (pid_t)atoi(e->d_name);
		if (pid > 0 && sbx__parent_of(pid) == getpid()) {
			if (n < max)
				out[n] = pid;
			n++;
		}
	}
	closedir(d);
	return n;
}

static void setup(void)
{
	fds_at_setup = count_fds();
	base = event_base_new();
	ck_assert_ptr_nonnull(base);
}

static void teardown(void)
{
	pid_t kids[4];
	ck_assert_int_eq(event_base_get_num_events(base, EVENT_BASE_COUNT_ADDED), 0);
	event_base_free(base);
	ck_assert_int_eq(count_fds(), fds_at_setup);
	ck_assert_int_eq(children(kids, 4), 0);
}

/* ------------------------------------------------------------------ loop */

struct wait {
	bool (*done)(void *arg);
	void *arg;
	double deadline;
	bool met;
};

static void on_poll(evutil_socket_t fd, short what, void *arg)
{
	struct wait *w = arg;
	if (w->done && w->done(w->arg)) {
		w->met = true;
		event_base_loopbreak(base);
	} else if (now() >= w->deadline) {
		event_base_loopbreak(base);
	}
}

/* Runs the loop until done(arg) holds (checked every 5 ms) or |seconds|
 * pass; whether it held.  done NULL: just runs the loop that long. */
static bool loop_until(bool (*done)(void *), void *arg, double seconds)
{
	struct wait w = { done, arg, now() + seconds, false };
	struct event *ev = event_new(base, -1, EV_PERSIST, on_poll, &w);
	struct timeval tv = { 0, 5000 };
	ck_assert_ptr_nonnull(ev);
	event_add(ev, &tv);
	event_base_dispatch(base);
	event_free(ev);
	return w.met;
}

/* What over() saw. */
struct trip {
	int calls;
	double when;
	int64_t peak;
	struct sbx__wd_entry *e;
};

static void on_over(void *arg)
{
	struct trip *t = arg;
	t->calls++;
	t->when = now();
	t->peak = sbx__watchdog_peak(t->e);
}

static bool tripped(void *arg)
{
	return ((struct trip *)arg)->calls > 0;
}

static bool ready3(void *arg)
{
	return __atomic_load_n(&((struct shared *)arg)->ready, __ATOMIC_SEQ_CST) >= 3;
}

/* ------------------------------------------------------------------ tests */

/* A process that grows by 4 MiB every 20 ms is caught over 64 MiB within a
 * few intervals of crossing it, once, though it stays over. */
START_TEST(growing_process_is_caught_once)
{
	const double interval = 0.05;
	struct sbx__watchdog *wd = sbx__watchdog_new(base, interval);
	ck_assert_ptr_nonnull(wd);
	struct proc p = start("grow", "4", "512", "20", "64");
	struct trip t = {0};
	t.e = sbx__watchdog_add(wd, p.pid, 64 * MIB, on_over, &t);
	ck_assert_ptr_nonnull(t.e);
	ck_assert_int_eq(sbx__watchdog_peak(t.e), -1);

	ck_assert_msg(loop_until(tripped, &t, 15), "not caught; helper at %lld bytes",
	              (long long)p.sh->rss);
	/* It stays over, and grows, for ten more intervals: no second call. */
	loop_until(NULL, NULL, 10 * interval);
	ck_assert_int_eq(t.calls, 1);
	ck_assert_msg(t.peak > 64 * MIB, "over() called at a peak of %lld", (long long)t.peak);
	ck_assert_msg(p.sh->t_cross > 0, "the helper never saw itself over");
	/* The helper notes the crossing after its step; a sample taken during
	 * that step can see it first. */
	double late = t.when - p.sh->t_cross;
	ck_assert_msg(late < 6 * interval && late > -0.1,
	              "caught %.3f s after the helper crossed the limit", late);

	int64_t peak = sbx__watchdog_peak(t.e);
	ck_assert_msg(peak >= 64 * MIB && peak < 512 * MIB, "peak %lld", (long long)peak);
	ck_assert(peak >= t.peak);
	stop(&p);
	sbx__watchdog_remove(wd, t.e);
	sbx__watchdog_free(wd);
}
END_TEST

/* Three children of 30 MiB each: none is over 64 MiB, their sum is.  Run
 * once per schedule of /proc scans (_i). */
START_TEST(tree_sum_trips)
{
	struct sbx__watchdog *wd = sbx__watchdog_new(base, 0.05);
	sbx__watchdog_set_schedule(wd, (enum sbx__wd_schedule)_i);
	struct proc p = start("tree", "3", "30", NULL, NULL);
	struct trip t = {0};
	t.e = sbx__watchdog_add(wd, p.pid, 64 * MIB, on_over, &t);
	ck_assert_ptr_nonnull(t.e);
	ck_assert_msg(loop_until(tripped, &t, 15), "not caught; %d children ready", p.sh->ready);
	loop_until(NULL, NULL, 0.2);
	ck_assert_int_eq(t.calls, 1);

	struct sbx__wd_stats st;
	sbx__watchdog_stats(wd, &st);
	ck_assert_uint_ge(st.adopted, 3);
	ck_assert_int_lt(rss_of(p.pid), 64 * MIB);
	for (int i = 0; i < 3; i++) {
		int64_t rss = rss_of(p.sh->pids[i]);
		ck_assert_msg(rss > 0 && rss < 64 * MIB, "child %d has %lld bytes", i, (long long)rss);
	}
	ck_assert_int_gt(sbx__watchdog_peak(t.e), 64 * MIB);
	stop(&p);
	sbx__watchdog_remove(wd, t.e);
	sbx__watchdog_free(wd);
}
END_TEST

static bool ready1(void *arg)
{
	return __atomic_load_n(&((struct shared *)arg)->ready, __ATOMIC_SEQ_CST) >= 1;
}

/* A grandchild whose parent exited before the watchdog ever saw it has been
 * re-parented out of the tree; it is still found, by the root's session. */
START_TEST(orphan_in_session_is_found)
{
	struct proc p = start("orphan", "80", NULL, NULL, NULL);
	ck_assert(loop_until(ready1, p.sh, 15));
	pid_t orphan = p.sh->pids[0], parent = sbx__parent_of(orphan);
	ck_assert_int_gt(orphan, 0);
	ck_assert_msg(parent != p.pid && parent > 0, "the orphan's parent is %d", (int)parent);

	struct sbx__watchdog *wd = sbx__watchdog_new(base, 0.02);
	struct trip t = {0};
	t.e = sbx__watchdog_add(wd, p.pid, 64 * MIB, on_over, &t);
	ck_assert_msg(loop_until(tripped, &t, 5), "the orphan was not counted: peak %lld",
	              (long long)sbx__watchdog_peak(t.e));
	struct sbx__wd_stats st;
	sbx__watchdog_stats(wd, &st);
	ck_assert_uint_eq(st.adopted, 1);
	ck_assert_int_ge(sbx__watchdog_peak(t.e), 80 * MIB);
	sbx__watchdog_remove(wd, t.e);
	sbx__watchdog_free(wd);
	stop(&p);
}
END_TEST

/* Threads are not members: /proc/TID/stat answers for a thread though /proc
 * does not list it, and counting one would count its process's memory
 * twice.  Once per schedule (_i). */
START_TEST(threads_count_once)
{
	struct proc p = start("threads", "3", "20", NULL, NULL);
	ck_assert(loop_until(ready3, p.sh, 15));
	struct sbx__watchdog *wd = sbx__watchdog_new(base, 0.02);
	sbx__watchdog_set_schedule(wd, (enum sbx__wd_schedule)_i);
	struct trip t = {0};
	t.e = sbx__watchdog_add(wd, p.pid, 100 * MIB, on_over, &t);
	loop_until(NULL, NULL, 0.2);
	struct sbx__wd_stats st;
	sbx__watchdog_stats(wd, &st);
	int64_t peak = sbx__watchdog_peak(t.e), rss = rss_of(p.pid);
	ck_assert_uint_eq(st.adopted, 0);
	ck_assert_int_eq(t.calls, 0);
	ck_assert_msg(rss >= 60 * MIB && peak >= rss - MIB && peak <= rss + MIB,
	              "peak %lld, the process has %lld", (long long)peak, (long long)rss);
	sbx__watchdog_remove(wd, t.e);
	sbx__watchdog_free(wd);
	stop(&p);
}
END_TEST

/* The sum is right: 3 x 30 MiB plus a little, under a limit it does not reach. */
START_TEST(tree_sum_is_accurate)
{
	struct sbx__watchdog *wd = sbx__watchdog_new(base, 0.05);
	struct proc p = start("tree", "3", "30", NULL, NULL);
	struct trip t = {0};
	t.e = sbx__watchdog_add(wd, p.pid, 256 * MIB, on_over, &t);
	ck_assert(loop_until(ready3, p.sh, 15));
	/* Two intervals after the last child touched its memory. */
	loop_until(NULL, NULL, 0.15);
	int64_t peak = sbx__watchdog_peak(t.e);
	int64_t sum = rss_of(p.pid);
	for (int i = 0; i < 3; i++)
		sum += rss_of(p.sh->pids[i]);
	ck_assert_msg(peak >= 90 * MIB && peak < 128 * MIB, "peak %lld", (long long)peak);
	ck_assert_msg(peak >= sum - 2 * MIB && peak <= sum + 2 * MIB,
	              "peak %lld, the members sum to %lld now", (long long)peak, (long long)sum);
	ck_assert_int_eq(t.calls, 0);
	stop(&p);
	sbx__watchdog_remove(wd, t.e);
	sbx__watchdog_free(wd);
}
END_TEST

static bool exited(void *arg)
{
	return sbx__exited(*(pid_t *)arg);
}

/* A root that keeps short-lived children: each is found and let go, no fd
 * is left behind, and nothing trips a high limit.  Once per schedule (_i). */
START_TEST(members_come_and_go)
{
	int fds = count_fds();
	struct sbx__watchdog *wd = sbx__watchdog_new(base, 0.02);
	sbx__watchdog_set_schedule(wd, (enum sbx__wd_schedule)_i);
	struct proc p = start("churn", "1", "8", NULL, NULL);
	struct trip t = {0};
	t.e = sbx__watchdog_add(wd, p.pid, 1024LL * MIB, on_over, &t);
	ck_assert_ptr_nonnull(t.e);
	ck_assert_msg(loop_until(exited, &p.pid, 15), "the churn helper did not finish");
	/* A few more ticks: the children are reaped, the root is a zombie. */
	loop_until(NULL, NULL, 0.1);

	struct sbx__wd_stats st;
	sbx__watchdog_stats(wd, &st);
	ck_assert_int_eq(t.calls, 0);
	ck_assert_int_ge(p.sh->spawned, 10);
	ck_assert_msg(st.adopted >= 5, "only %llu of %d children found",
	              (unsigned long long)st.adopted, p.sh->spawned);
	ck_assert_uint_eq(st.departed, st.adopted);
	int64_t peak = sbx__watchdog_peak(t.e);
	ck_assert_msg(peak >= 8 * MIB && peak < 64 * MIB, "peak %lld", (long long)peak);
	/* Only the root's statm and /proc itself are open now. */
	ck_assert_int_le(count_fds(), fds + 3);
	sbx__watchdog_remove(wd, t.e);
	ck_assert_int_eq(count_fds(), fds);
	stop(&p);
	sbx__watchdog_free(wd);
	ck_assert_int_eq(count_fds(), fds);
}
END_TEST

static volatile sig_atomic_t sigchld_count;

static void on_sigchld(int sig)
{
	sigchld_count++;
}

static int threads_of_self(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	int n = -1;
	while (f && fgets(line, sizeof line, f))
		if (sscanf(line, "Threads: %d", &n) == 1)
			break;
	if (f)
		fclose(f);
	return n;
}

/*
 * Sampling starts no process and no thread.  Any child this process starts
 * sends it SIGCHLD when it exits (a sampler such as ps would), and one that
 * is reaped adds to RUSAGE_CHILDREN; so both stay at zero while the
 * watchdog scans /proc on every tick, and the only child is the helper.
 */
START_TEST(no_process_is_started)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_sigchld;
	sigemptyset(&sa.sa_mask);
	ck_assert_int_eq(sigaction(SIGCHLD, &sa, NULL), 0);

	struct proc p = start("tree", "3", "1", NULL, NULL);
	struct sbx__watchdog *wd = sbx__watchdog_new(base, 0.01);
	sbx__watchdog_set_schedule(wd, SBX__WD_EVERY_TICK);
	struct trip t = {0};
	t.e = sbx__watchdog_add(wd, p.pid, 1024LL * MIB, on_over, &t);
	ck_assert(loop_until(ready3, p.sh, 15));
	loop_until(NULL, NULL, 0.5);

	struct sbx__wd_stats st;
	sbx__watchdog_stats(wd, &st);
	/* At least ten ticks, each with a full scan (valgrind's pace gets no
	 * more than that into half a second). */
	ck_assert_uint_ge(st.ticks, 10);
	ck_assert_uint_ge(st.scans_full, 10);
	ck_assert_uint_ge(st.adopted, 3);
	ck_assert_int_eq(sigchld_count, 0);
	struct rusage ru;
	getrusage(RUSAGE_CHILDREN, &ru);
	ck_assert_int_eq(ru.ru_utime.tv_sec + ru.ru_utime.tv_usec + ru.ru_stime.tv_sec +
	                 ru.ru_stime.tv_usec, 0);
	ck_assert_int_eq(ru.ru_maxrss, 0);
	pid_t kids[4];
	ck_assert_int_eq(children(kids, 4), 1);
	ck_assert_int_eq(kids[0], p.pid);
	ck_assert_int_eq(threads_of_self(), 1);

	sbx__watchdog_remove(wd, t.e);
	sbx__watchdog_free(wd);
	stop(&p);
}
END_TEST

struct pair {
	struct sbx__watchdog *wd;
	struct sbx__wd_entry *a, *b, *c;
	int a_calls, b_calls, c_calls;
	pid_t c_root;
};

static void over_c(void *arg)
{
	((struct pair *)arg)->c_calls++;
}

/* A's over() removes itself and B, which is also over and due next in the
 * same tick, and adds C. */
static void over_a(void *arg)
{
	struct pair *x = arg;
	x->a_calls++;
	sbx__watchdog_remove(x->wd, x->a);
	sbx__watchdog_remove(x->wd, x->b);
	x->a = x->b = NULL;
	x->c = sbx__watchdog_add(x->wd, x->c_root, 1024LL * MIB, over_c, x);
}

static void over_b(void *arg)
{
	((struct pair *)arg)->b_calls++;
}

static bool c_sampled(void *arg)
{
	struct pair *x = arg;
	return x->c && sbx__watchdog_peak(x->c) > 0;
}

START_TEST(over_may_remove_and_add)
{
	struct proc pa = start("sleep", NULL, NULL, NULL, NULL);
	struct proc pb = start("sleep", NULL, NULL, NULL, NULL);
	struct proc pc = start("sleep", NULL, NULL, NULL, NULL);
	struct pair x = {0};
	x.wd = sbx__watchdog_new(base, 0.02);
	x.c_root = pc.pid;
	/* Any process is over one byte. */
	x.a = sbx__watchdog_add(x.wd, pa.pid, 1, over_a, &x);
	x.b = sbx__watchdog_add(x.wd, pb.pid, 1, over_b, &x);
	ck_assert(x.a && x.b);
	ck_assert(loop_until(c_sampled, &x, 10));
	ck_assert_int_eq(x.a_calls, 1);
	ck_assert_int_eq(x.b_calls, 0);
	ck_assert_int_eq(x.c_calls, 0);
	ck_assert_int_eq(event_base_get_num_events(base, EVENT_BASE_COUNT_ADDED), 1);
	sbx__watchdog_remove(x.wd, x.c);
	ck_assert_int_eq(event_base_get_num_events(base, EVENT_BASE_COUNT_ADDED), 0);
	sbx__watchdog_free(x.wd);
	stop(&pa);
	stop(&pb);
	stop(&pc);
}
END_TEST

struct self_remove {
	struct sbx__watchdog *wd;
	struct sbx__wd_entry *e;
	int calls;
};

static void over_remove_self(void *arg)
{
	struct self_remove *r = arg;
	r->calls++;
	sbx__watchdog_remove(r->wd, r->e);
}

/* The last entry removed from inside over() stops the timer, so the loop
 * returns by itself: nothing else is pending. */
START_TEST(loop_returns_when_last_entry_removed)
{
	int fds = count_fds();
	struct proc p = start("sleep", NULL, NULL, NULL, NULL);
	struct self_remove r = {0};
	r.wd = sbx__watchdog_new(base, 0.02);
	r.e = sbx__watchdog_add(r.wd, p.pid, 1, over_remove_self, &r);
	ck_assert_ptr_nonnull(r.e);
	ck_assert_int_eq(event_base_get_num_events(base, EVENT_BASE_COUNT_ADDED), 1);
	double t0 = now();
	/* 1: it returned because no event was left. */
	ck_assert_int_eq(event_base_dispatch(base), 1);
	ck_assert_int_eq(r.calls, 1);
	ck_assert(now() - t0 < 5);
	ck_assert_int_eq(event_base_get_num_events(base, EVENT_BASE_COUNT_ADDED), 0);
	/* The watchdog holds no fd while idle. */
	ck_assert_int_eq(count_fds(), fds);
	sbx__watchdog_free(r.wd);
	stop(&p);
	ck_assert_int_eq(count_fds(), fds);
}
END_TEST

/* Entries removed, then the watchdog freed: no event, no fd; and it can be
 * used again in between. */
START_TEST(remove_then_free_leaves_nothing)
{
	int fds = count_fds();
	struct proc p[3];
	struct trip t[3] = {{0}};
	struct sbx__watchdog *wd = sbx__watchdog_new(base, 0.02);
	for (int round = 0; round < 2; round++) {
		for (int i = 0; i < 3; i++) {
			p[i] = start("tree", "2", "1", NULL, NULL);
			t[i].e = sbx__watchdog_add(wd, p[i].pid, 1024LL * MIB, on_over, &t[i]);
			ck_assert_ptr_nonnull(t[i].e);
		}
		loop_until(NULL, NULL, 0.2);
		struct sbx__wd_stats st;
		sbx__watchdog_stats(wd, &st);
		ck_assert_uint_ge(st.adopted, 6 * (unsigned)(round + 1));
		for (int i = 0; i < 3; i++) {
			ck_assert_int_gt(sbx__watchdog_peak(t[i].e), 0);
			sbx__watchdog_remove(wd, t[i].e);
			stop(&p[i]);
		}
		ck_assert_int_eq(event_base_get_num_events(base, EVENT_BASE_COUNT_ADDED), 0);
		ck_assert_int_eq(count_fds(), fds);
	}
	sbx__watchdog_free(wd);
	ck_assert_int_eq(count_fds(), fds);
	sbx__watchdog_free(NULL);
}
END_TEST

/* Adding a pid that is gone fails with errno and leaves nothing behind. */
START_TEST(add_gone_root_fails)
{
	int fds = count_fds();
	struct proc p = start("sleep", NULL, NULL, NULL, NULL);
	pid_t pid = p.pid;
	stop(&p);
	struct sbx__watchdog *wd = sbx__watchdog_new(base, 0);
	struct trip t = {0};
	errno = 0;
	ck_assert_ptr_null(sbx__watchdog_add(wd, pid, MIB, on_over, &t));
	ck_assert_msg(errno == ENOENT || errno == ESRCH, "errno %d", errno);
	errno = 0;
	ck_assert_ptr_null(sbx__watchdog_add(wd, getpid(), MIB, NULL, &t));
	ck_assert_int_eq(errno, EINVAL);
	ck_assert_int_eq(event_base_get_num_events(base, EVENT_BASE_COUNT_ADDED), 0);
	ck_assert_int_eq(count_fds(), fds);
	sbx__watchdog_remove(wd, NULL);
	sbx__watchdog_free(wd);
}
END_TEST

/* The last pid the kernel handed out (the fifth field of /proc/loadavg). */
static long last_pid(void)
{
	FILE *f = fopen("/proc/loadavg", "re");
	long pid = -1;
	ck_assert_ptr_nonnull(f);
	ck_assert_int_eq(fscanf(f, "%*s %*s %*s %*s %ld", &pid), 1);
	fclose(f);
	return pid;
}

/* With nothing forking, a quiet tree costs samples, not scans: after the
 * first full scan, ticks skip the scan or read only new processes. */
START_TEST(quiet_tree_is_not_rescanned)
{
	struct proc p = start("tree", "3", "1", NULL, NULL);
	struct sbx__watchdog *wd = sbx__watchdog_new(base, 0.01);
	struct trip t = {0};
	t.e = sbx__watchdog_add(wd, p.pid, 1024LL * MIB, on_over, &t);
	ck_assert(loop_until(ready3, p.sh, 15));
	loop_until(NULL, NULL, 0.1);
	struct sbx__wd_stats a, b;
	long pid_a = last_pid();
	sbx__watchdog_stats(wd, &a);
	ck_assert_uint_ge(a.adopted, 3);
	loop_until(NULL, NULL, 0.5);
	sbx__watchdog_stats(wd, &b);
	/* A busy machine may wrap the pid counter (pid_max can be 32768),
	 * which rightly costs a full scan. */
	unsigned wrapped = last_pid() < pid_a;
	uint64_t ticks = b.ticks - a.ticks;
	ck_assert_uint_ge(ticks, 20);
	ck_assert_uint_eq(b.samples - a.samples, 4 * ticks);
	/* Full scans: the periodic check (every 32 ticks) only, and one for a
	 * wrap; other processes on the machine may fork and cause cheap scans
	 * of new pids. */
	ck_assert_uint_le(b.scans_full - a.scans_full, ticks / 32 + 1 + wrapped);
	ck_assert_uint_eq(b.adopted, a.adopted);
	sbx__watchdog_remove(wd, t.e);
	sbx__watchdog_free(wd);
	stop(&p);
}
END_TEST


/* ------------------------------------------------------------ kill tree */

/* Processes whose command line holds |token|, other than this one. */
static int count_token(const char *token)
{
	int n = 0;
	DIR *d = opendir("/proc");
	for (struct dirent *e; d && (e = readdir(d));) {
		char path[300], buf[512];
		snprintf(path, sizeof path, "/proc/%s/cmdline", e->d_name);
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		ssize_t len = read(fd, buf, sizeof buf - 1);
		close(fd);
		for (ssize_t i = 0; i < len; i += (ssize_t)strlen(buf + i) + 1) {
			buf[len] = '\0';
			if (strcmp(buf + i, token) == 0) {
				n++;
				break;
			}
		}
	}
	if (d)
		closedir(d);
	return n;
}

/*
 * A tree whose members left the root's session and group (setsid) is found
 * and killed whole: through the children files (_i 0) and by scanning /proc
 * as on kernels without them (_i 1).
 */
START_TEST(kill_tree_finds_detached_members)
{
	char token[32], line[256];
	snprintf(token, sizeof token, "1000.%d", (int)getpid());
	snprintf(line, sizeof line, "setsid sleep %s & setsid sh -c 'sleep %s & sleep %s & wait' & wait",
	         token, token, token);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		execl("/bin/sh", "sh", "-c", line, (char *)NULL);
		_exit(127);
	}
	double give_up = now() + 10;
	while (count_token(token) < 3 && now() < give_up)
		sleep_ms(10);
	ck_assert_int_eq(count_token(token), 3);

	sbx__proc_scan_only = _i == 1;
	int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	sbx__kill_tree(pid, pidfd);
	ck_assert_int_eq(waitpid(pid, NULL, 0), pid);
	if (pidfd >= 0)
		close(pidfd);
	give_up = now() + 5;
	while (count_token(token) > 0 && now() < give_up)
		sleep_ms(10);
	ck_assert_msg(count_token(token) == 0, "%d members survived", count_token(token));
}
END_TEST

/* ------------------------------------------------------------------- main */

static Suite *suite(void)
{
	Suite *s = suite_create("watchdog");
	TCase *tc = tcase_create("limits");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, TIMEOUT);
	tcase_add_test(tc, growing_process_is_caught_once);
	tcase_add_loop_test(tc, tree_sum_trips, SBX__WD_GATED, SBX__WD_EVERY_TICK + 1);
	tcase_add_test(tc, tree_sum_is_accurate);
	suite_add_tcase(s, tc);

	tc = tcase_create("membership");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, TIMEOUT);
	tcase_add_loop_test(tc, members_come_and_go, SBX__WD_GATED, SBX__WD_EVERY_TICK + 1);
	tcase_add_test(tc, orphan_in_session_is_found);
	tcase_add_loop_test(tc, threads_count_once, SBX__WD_GATED, SBX__WD_EVERY_TICK + 1);
	tcase_add_test(tc, no_process_is_started);
	tcase_add_test(tc, quiet_tree_is_not_rescanned);
	suite_add_tcase(s, tc);

	tc = tcase_create("lifecycle");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, TIMEOUT);
	tcase_add_test(tc, over_may_remove_and_add);
	tcase_add_test(tc, loop_returns_when_last_entry_removed);
	tcase_add_test(tc, remove_then_free_leaves_nothing);
	tcase_add_test(tc, add_gone_root_fails);
	suite_add_tcase(s, tc);

	tc = tcase_create("kill_tree");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, TIMEOUT);
	tcase_add_loop_test(tc, kill_tree_finds_detached_members, 0, 2);
	suite_add_tcase(s, tc);
	return s;
}

int main(int argc, char **argv)
{
	if (argc >= 3 && strcmp(argv[1], "--helper") == 0)
		return helper(argc - 2, argv + 2);
	if (!realpath(argv[0], self_path)) {
		perror(argv[0]);
		return EXIT_FAILURE;
	}
	SRunner *sr = srunner_create(suite());
	srunner_run_all(sr, CK_ENV);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
