/*
 * testutil.c -- the fixture, the helper modes and the /proc probes the Check
 * suites share.  See testutil.h for what each function promises.
 */
#include "testutil.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

struct event_base *tu_base;

static sbx_sandbox *tu_sb;
static tu_fds tu_setup_fds;
static char tu_exe[PATH_MAX];
static char tu_ld_path[4096];
static char tu_dir[64];
static char tu_files[8][PATH_MAX];
static int tu_nfiles;

/* ------------------------------------------------------------- helpers */

static void helper_sleep(double seconds)
{
	struct timespec ts;

	ts.tv_sec = (time_t)seconds;
	ts.tv_nsec = (long)((seconds - (double)ts.tv_sec) * 1e9);
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

static void helper_write_all(int fd, const char *data, size_t len)
{
	while (len > 0) {
		ssize_t n = write(fd, data, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			_exit(100);
		data += n;
		len -= (size_t)n;
	}
}

/* Prints the fds open in this process, ascending, space-separated. */
static int helper_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	char line[4096] = "";
	int fds[1024], n = 0;

	if (d == NULL)
		return 101;
	while ((e = readdir(d)) != NULL && n < 1024) {
		int fd;

		if (e->d_name[0] == '.')
			continue;
		fd = atoi(e->d_name);
		if (fd != dirfd(d))
			fds[n++] = fd;
	}
	closedir(d);
	for (int i = 1; i < n; i++)
		for (int j = i; j > 0 && fds[j - 1] > fds[j]; j--) {
			int t = fds[j];

			fds[j] = fds[j - 1];
			fds[j - 1] = t;
		}
	for (int i = 0; i < n; i++) {
		size_t used = strlen(line);

		snprintf(line + used, sizeof(line) - used, "%s%d", i ? " " : "", fds[i]);
	}
	strncat(line, "\n", sizeof(line) - strlen(line) - 1);
	helper_write_all(1, line, strlen(line));
	return 0;
}

/* Copies the SigBlk and SigIgn lines of /proc/self/status to stdout. */
static int helper_sigstate(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];

	if (f == NULL)
		return 101;
	while (fgets(line, sizeof(line), f) != NULL)
		if (strncmp(line, "SigBlk:", 7) == 0 || strncmp(line, "SigIgn:", 7) == 0)
			helper_write_all(1, line, strlen(line));
	fclose(f);
	return 0;
}

static void supervise_done(sbx_result *r, void *arg)
{
	sbx_result_free(r);
	_exit(0);
}

/* Runs "/bin/sleep DURATION" through libsbx (passthrough, or bwrap when
 * |backend| says so) and then waits on the loop, to be SIGKILLed by the test. */
static int helper_supervise(const char *duration, const char *backend)
{
	const char *argv[] = { "/bin/sleep", duration, NULL };
	struct event_base *base = event_base_new();
	sbx_policy *p = sbx_policy_new();
	sbx_sandbox_options so;
	sbx_run_options o;
	sbx_sandbox *sb = NULL;

	if (base == NULL || p == NULL || duration == NULL)
		return 103;
	sbx_sandbox_options_init(&so);
	so.backend = backend && strcmp(backend, "bwrap") == 0 ? SBX_BACKEND_BWRAP
	                                                      : SBX_BACKEND_PASSTHROUGH;
	if (sbx_sandbox_new(base, p, &so, &sb, NULL) < 0)
		return 104;
	sbx_run_options_init(&o);
	o.argv = argv;
	o.timeout = 0;
	if (sbx_run_start(sb, &o, supervise_done, NULL, NULL, NULL) < 0)
		return 105;
	event_base_dispatch(base);
	return 106;
}

static int helper_main(int argc, char **argv)
{
	const char *mode = argv[2];
	const char *arg = argc > 3 ? argv[3] : NULL;

	if (strcmp(mode, "fds") == 0)
		return helper_fds();
	if (strcmp(mode, "argv") == 0) {
		/* Each argument after the mode, NUL-terminated. */
		for (int i = 3; i < argc; i++)
			helper_write_all(1, argv[i], strlen(argv[i]) + 1);
		return 0;
	}
	if (strcmp(mode, "ignore-term") == 0) {
		signal(SIGTERM, SIG_IGN);
		signal(SIGINT, SIG_IGN);
		signal(SIGHUP, SIG_IGN);
		helper_write_all(1, "ready\n", 6);
		for (;;)
			pause();
	}
	if (strcmp(mode, "spin") == 0) {
		volatile unsigned long n = 0;

		for (;;)
			n++;
	}
	if (strcmp(mode, "write-forever") == 0) {
		static char block[65536];

		memset(block, 'w', sizeof(block));
		for (;;)
			helper_write_all(1, block, sizeof(block));
	}
	if (strcmp(mode, "close-stdout-and-sleep") == 0) {
		close(1);
		close(2);
		helper_sleep(arg ? atof(arg) : 1.0);
		return 5;
	}
	if (strcmp(mode, "close-stdin-and-sleep") == 0) {
		close(0);
		helper_sleep(arg ? atof(arg) : 0.5);
		return 7;
	}
	if (strcmp(mode, "session") == 0) {
		char line[128];
		int tty = open("/dev/tty", O_RDWR | O_NOCTTY);
		int tty_errno = tty < 0 ? errno : 0;

		snprintf(line, sizeof(line), "%d %d %d %d\n", (int)getpid(), (int)getsid(0),
		         (int)getpgrp(), tty_errno);
		helper_write_all(1, line, strlen(line));
		return 0;
	}
	if (strcmp(mode, "sigstate") == 0)
		return helper_sigstate();
	if (strcmp(mode, "supervise") == 0)
		return helper_supervise(arg, argc > 4 ? argv[4] : NULL);
	if (strcmp(mode, "exit") == 0)
		return arg ? atoi(arg) : 0;
	fprintf(stderr, "unknown helper mode %s\n", mode);
	return 102;
}

void tu_init(int argc, char **argv)
{
	ssize_t n;
	const char *ld;

	if (argc >= 3 && strcmp(argv[1], "--helper") == 0)
		exit(helper_main(argc, argv));

	/* Under libtool the program is a wrapper script that execs the real
	 * binary; /proc/self/exe names the real one, which needs the wrapper's
	 * LD_LIBRARY_PATH, and runs do not inherit the caller's environment. */
	n = readlink("/proc/self/exe", tu_exe, sizeof(tu_exe) - 1);
	if (n > 0)
		tu_exe[n] = '\0';
	else
		snprintf(tu_exe, sizeof(tu_exe), "%s", argv[0]);
	ld = getenv("LD_LIBRARY_PATH");
	if (ld != NULL && strlen(ld) < sizeof(tu_ld_path))
		snprintf(tu_ld_path, sizeof(tu_ld_path), "%s", ld);
}

const char *tu_self(void)
{
	return tu_exe;
}

void tu_helper(sbx_run_options *o, tu_cmd *c, const char *mode, const char *arg1,
               const char *arg2)
{
	int i = 0;

	memset(c, 0, sizeof(*c));
	c->argv[i++] = tu_exe;
	c->argv[i++] = "--helper";
	c->argv[i++] = mode;
	if (arg1 != NULL)
		c->argv[i++] = arg1;
	if (arg1 != NULL && arg2 != NULL)
		c->argv[i++] = arg2;
	c->argv[i] = NULL;
	if (tu_ld_path[0] != '\0') {
		snprintf(c->ld_path, sizeof(c->ld_path), "LD_LIBRARY_PATH=%s", tu_ld_path);
		c->env[0] = c->ld_path;
	}
	o->argv = c->argv;
	o->shell = NULL;
	o->env = c->env;
}

int tu_run_suite(Suite *s)
{
	SRunner *sr = srunner_create(s);
	int failed;

	srunner_run_all(sr, CK_ENV);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

/* ------------------------------------------------------------- fixture */

/* Removes what tu_tmpdir() and tu_write_file() made. */
static void tu_remove_tmp(void)
{
	for (int i = 0; i < tu_nfiles; i++)
		unlink(tu_files[i]);
	if (tu_dir[0] != '\0')
		rmdir(tu_dir);
	tu_nfiles = 0;
	tu_dir[0] = '\0';
}

static void tu_setup(void)
{
	tu_fds_snapshot(&tu_setup_fds);
	tu_base = event_base_new();
	ck_assert_ptr_nonnull(tu_base);
	ck_assert_int_eq(event_base_get_num_events(tu_base, EVENT_BASE_COUNT_ADDED), 0);
	tu_sb = NULL;
	tu_dir[0] = '\0';
	tu_nfiles = 0;
}

static void tu_teardown(void)
{
	tu_fds now;
	int st;
	pid_t pid;

	tu_sandbox_free();
	ck_assert_msg(event_base_get_num_events(tu_base, EVENT_BASE_COUNT_ADDED |
	                                                 EVENT_BASE_COUNT_ACTIVE) == 0,
	              "the library left %d events on the base after sbx_sandbox_free",
	              event_base_get_num_events(tu_base, EVENT_BASE_COUNT_ADDED |
	                                                  EVENT_BASE_COUNT_ACTIVE));
	event_base_free(tu_base);
	tu_base = NULL;

	tu_remove_tmp();

	tu_fds_snapshot(&now);
	tu_fds_assert_same(&tu_setup_fds, &now, "at teardown");
	tu_fds_free(&now);
	tu_fds_free(&tu_setup_fds);

	/* Every child the library started has been reaped by now. */
	pid = waitpid(-1, &st, WNOHANG);
	ck_assert_msg(pid == -1 && errno == ECHILD,
	              "a child of the test process is left at teardown (waitpid: %d, %s)",
	              (int)pid, pid < 0 ? strerror(errno) : "still there");
}

/*
 * Runs in the runner after each TCase: removes the directories of tests
 * that failed before their teardown (a failed assertion ends the test's
 * process at once).  They hold only files.
 */
static void tu_sweep(void)
{
	char prefix[64];
	DIR *d = opendir("/tmp");
	struct dirent *e;

	if (d == NULL)
		return;
	snprintf(prefix, sizeof(prefix), "sbx-test-%d-", (int)getpid());
	while ((e = readdir(d)) != NULL) {
		char path[PATH_MAX];
		DIR *sub;
		struct dirent *f;

		if (strncmp(e->d_name, prefix, strlen(prefix)) != 0)
			continue;
		snprintf(path, sizeof(path), "/tmp/%s", e->d_name);
		sub = opendir(path);
		if (sub == NULL)
			continue;
		while ((f = readdir(sub)) != NULL)
			if (strcmp(f->d_name, ".") != 0 && strcmp(f->d_name, "..") != 0)
				unlinkat(dirfd(sub), f->d_name, 0);
		closedir(sub);
		rmdir(path);
	}
	closedir(d);
}

TCase *tu_tcase(const char *name, int timeout)
{
	TCase *tc = tcase_create(name);

	tcase_add_unchecked_fixture(tc, NULL, tu_sweep);
	tcase_add_checked_fixture(tc, tu_setup, tu_teardown);
	tcase_set_timeout(tc, timeout);
	return tc;
}

sbx_sandbox *tu_sandbox(const sbx_policy *policy, unsigned max_starting)
{
	sbx_sandbox_options so;
	sbx_policy *own = NULL;
	sbx_error err;
	int rc;

	ck_assert_msg(tu_sb == NULL, "the fixture holds one sandbox at a time");
	sbx_sandbox_options_init(&so);
	so.backend = SBX_BACKEND_PASSTHROUGH;
	if (max_starting != 0)
		so.max_starting = max_starting;
	if (policy == NULL) {
		own = sbx_policy_new();
		ck_assert_ptr_nonnull(own);
		policy = own;
	}
	memset(&err, 0, sizeof(err));
	rc = sbx_sandbox_new(tu_base, policy, &so, &tu_sb, &err);
	sbx_policy_free(own);
	ck_assert_msg(rc == 0, "sbx_sandbox_new: %d (%s) %s", rc, sbx_strerror(rc), err.message);
	ck_assert_ptr_nonnull(tu_sb);
	return tu_sb;
}

void tu_sandbox_free(void)
{
	sbx_sandbox *sb = tu_sb;

	tu_sb = NULL;
	sbx_sandbox_free(sb);
}

/* ------------------------------------------------------------------ runs */

double tu_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void tu_call_cb(sbx_result *result, void *arg)
{
	tu_call *c = arg;

	if (c->calls++ == 0) {
		c->result = result;
		c->finished = tu_now();
		c->run = NULL;
	} else {
		sbx_result_free(result);
	}
}

void tu_start(sbx_sandbox *sb, const sbx_run_options *o, tu_call *c)
{
	sbx_error err;
	int rc;

	memset(c, 0, sizeof(*c));
	memset(&err, 0, sizeof(err));
	c->started = tu_now();
	rc = sbx_run_start(sb, o, tu_call_cb, c, &c->run, &err);
	ck_assert_msg(rc == 0, "sbx_run_start: %d (%s) %s", rc, sbx_strerror(rc), err.message);
	ck_assert_msg(c->calls == 0, "the callback fired inside sbx_run_start");
	ck_assert_ptr_nonnull(c->run);
}

/*
 * EVLOOP_NONBLOCK alone keeps looping for as long as some event is active
 * after a poll, which with an endless writer can be forever; with
 * EVLOOP_ONCE it makes one pass.
 */
void tu_spin_loop(int rounds)
{
	for (int i = 0; i < rounds; i++) {
		event_base_loop(tu_base, EVLOOP_ONCE | EVLOOP_NONBLOCK);
		usleep(5000);
	}
}

void tu_wait(tu_call *c)
{
	while (c->calls == 0) {
		int rc = event_base_loop(tu_base, EVLOOP_ONCE);

		ck_assert_msg(rc >= 0, "event_base_loop failed");
		ck_assert_msg(rc == 0 || c->calls > 0,
		              "the loop has no events left but the run's callback has not fired");
	}
	/* A second call would come from the loop too: give it the chance. */
	tu_spin_loop(3);
	ck_assert_msg(c->calls == 1, "the callback fired %d times", c->calls);
	ck_assert_ptr_nonnull(c->result);
}

sbx_result *tu_run(sbx_sandbox *sb, const sbx_run_options *o, tu_call *c)
{
	tu_start(sb, o, c);
	tu_wait(c);
	return c->result;
}

double tu_call_wall(const tu_call *c)
{
	return c->finished - c->started;
}

void tu_call_done(tu_call *c)
{
	sbx_result_free(c->result);
	c->result = NULL;
}

/* ------------------------------------------------------------- the host */

void tu_token(char *buf, size_t size, const char *base)
{
	snprintf(buf, size, "%s.%d", base, (int)getpid());
}

/* True when the NUL-separated |cmdline| of |len| bytes has an element equal
 * to |token|. */
static bool cmdline_has(const char *cmdline, size_t len, const char *token)
{
	size_t i = 0;

	while (i < len) {
		const char *arg = cmdline + i;
		size_t n = strnlen(arg, len - i);

		if (n == strlen(token) && memcmp(arg, token, n) == 0)
			return true;
		i += n + 1;
	}
	return false;
}

static int find_procs(const char *token, int *pids, int max)
{
	DIR *d = opendir("/proc");
	struct dirent *e;
	int found = 0;
	int self = (int)getpid();

	ck_assert_ptr_nonnull(d);
	while ((e = readdir(d)) != NULL) {
		char path[64], cmdline[8192];
		int pid, fd;
		ssize_t n;

		if (e->d_name[0] < '0' || e->d_name[0] > '9')
			continue;
		pid = atoi(e->d_name);
		if (pid == self)
			continue;
		snprintf(path, sizeof(path), "/proc/%d/cmdline", pid);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		do
			n = read(fd, cmdline, sizeof(cmdline));
		while (n < 0 && errno == EINTR);
		close(fd);
		if (n > 0 && cmdline_has(cmdline, (size_t)n, token)) {
			if (found < max)
				pids[found] = pid;
			found++;
		}
	}
	closedir(d);
	return found;
}

int tu_find_proc(const char *token)
{
	int pid = 0;

	return find_procs(token, &pid, 1) > 0 ? pid : 0;
}

int tu_find_prog(const char *token, const char *prog)
{
	int pids[64];
	int n = find_procs(token, pids, 64);

	for (int i = 0; i < n && i < 64; i++) {
		char path[64], comm[64] = "";
		snprintf(path, sizeof(path), "/proc/%d/comm", pids[i]);
		FILE *f = fopen(path, "r");
		if (f == NULL)
			continue;
		if (fgets(comm, sizeof(comm), f) != NULL)
			comm[strcspn(comm, "\n")] = '\0';
		fclose(f);
		if (strcmp(comm, prog) == 0)
			return pids[i];
	}
	return 0;
}

bool tu_wait_gone(const char *token, double seconds)
{
	double end = tu_now() + seconds;

	for (;;) {
		if (tu_find_proc(token) == 0)
			return true;
		if (tu_now() > end)
			return false;
		usleep(10000);
	}
}

int tu_loop_until_proc(const char *token, double seconds)
{
	double end = tu_now() + seconds;
	int pid;

	while ((pid = tu_find_proc(token)) == 0) {
		ck_assert_msg(tu_now() < end, "no process with \"%s\" appeared within %.1f s", token,
		              seconds);
		event_base_loop(tu_base, EVLOOP_ONCE | EVLOOP_NONBLOCK);
		usleep(5000);
	}
	return pid;
}

int tu_kill_token(const char *token)
{
	int pids[64];
	int n = find_procs(token, pids, 64);

	for (int i = 0; i < n && i < 64; i++)
		kill(pids[i], SIGKILL);
	return n;
}

void tu_fds_snapshot(tu_fds *s)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int cap = 64;

	ck_assert_ptr_nonnull(d);
	s->n = 0;
	s->fd = malloc(sizeof(*s->fd) * (size_t)cap);
	s->target = malloc(sizeof(*s->target) * (size_t)cap);
	ck_assert(s->fd != NULL && s->target != NULL);
	while ((e = readdir(d)) != NULL) {
		char path[64], target[PATH_MAX];
		ssize_t n;
		int fd;

		if (e->d_name[0] == '.')
			continue;
		fd = atoi(e->d_name);
		if (fd == dirfd(d))
			continue;
		if (s->n == cap) {
			cap *= 2;
			s->fd = realloc(s->fd, sizeof(*s->fd) * (size_t)cap);
			s->target = realloc(s->target, sizeof(*s->target) * (size_t)cap);
			ck_assert(s->fd != NULL && s->target != NULL);
		}
		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
		n = readlink(path, target, sizeof(target) - 1);
		target[n > 0 ? n : 0] = '\0';
		s->fd[s->n] = fd;
		s->target[s->n] = strdup(target);
		s->n++;
	}
	closedir(d);
}

void tu_fds_free(tu_fds *s)
{
	for (int i = 0; i < s->n; i++)
		free(s->target[i]);
	free(s->fd);
	free(s->target);
	memset(s, 0, sizeof(*s));
}

static int fds_index(const tu_fds *s, int fd)
{
	for (int i = 0; i < s->n; i++)
		if (s->fd[i] == fd)
			return i;
	return -1;
}

void tu_fds_assert_same(const tu_fds *before, const tu_fds *now, const char *where)
{
	for (int i = 0; i < now->n; i++)
		ck_assert_msg(fds_index(before, now->fd[i]) >= 0,
		              "%s: fd %d (%s) is open that was not before (%d open now, %d before)",
		              where, now->fd[i], now->target[i], now->n, before->n);
	for (int i = 0; i < before->n; i++)
		ck_assert_msg(fds_index(now, before->fd[i]) >= 0,
		              "%s: fd %d (%s) was closed behind the test's back", where,
		              before->fd[i], before->target[i]);
}

int tu_count_fds(void)
{
	tu_fds s;
	int n;

	tu_fds_snapshot(&s);
	n = s.n;
	tu_fds_free(&s);
	return n;
}

long tu_rss_kib(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	long kib = -1;

	ck_assert_ptr_nonnull(f);
	while (fgets(line, sizeof(line), f) != NULL)
		if (sscanf(line, "VmRSS: %ld kB", &kib) == 1)
			break;
	fclose(f);
	ck_assert_msg(kib > 0, "no VmRSS in /proc/self/status");
	return kib;
}

long tu_raise_nofile(void)
{
	struct rlimit rl;

	ck_assert_int_eq(getrlimit(RLIMIT_NOFILE, &rl), 0);
	rl.rlim_cur = rl.rlim_max;
	ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &rl), 0);
	return (long)rl.rlim_cur;
}

const char *tu_tmpdir(void)
{
	if (tu_dir[0] == '\0') {
		/* Named after the runner (the test's parent) so that tu_sweep()
		 * finds it when a failed test never reached its teardown. */
		snprintf(tu_dir, sizeof(tu_dir), "/tmp/sbx-test-%d-XXXXXX", (int)getppid());
		ck_assert_ptr_nonnull(mkdtemp(tu_dir));
	}
	return tu_dir;
}

const char *tu_write_file(const char *name, const void *data, size_t len, unsigned mode)
{
	char *path;
	int fd;

	ck_assert_int_lt(tu_nfiles, 8);
	path = tu_files[tu_nfiles++];
	snprintf(path, PATH_MAX, "%s/%s", tu_tmpdir(), name);
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	ck_assert_msg(fd >= 0, "cannot create %s: %s", path, strerror(errno));
	ck_assert_int_eq(write(fd, data, len), (ssize_t)len);
	ck_assert_int_eq(fchmod(fd, (mode_t)mode), 0);
	ck_assert_int_eq(close(fd), 0);
	return path;
}

bool tu_under_valgrind(void)
{
	FILE *f = fopen("/proc/self/maps", "r");
	char line[512];
	bool found = false;

	if (f == NULL)
		return false;
	while (!found && fgets(line, sizeof(line), f) != NULL)
		found = strstr(line, "vgpreload") != NULL;
	fclose(f);
	return found;
}

bool tu_contains(const char *hay, const char *needle)
{
	return hay != NULL && needle != NULL && strstr(hay, needle) != NULL;
}
