/*
 * check_run.c -- the run engine on the passthrough backend: what a run
 * reports, what the child gets, how runs end, and what the supervisor
 * survives (THREATS.md, the resource-abuse and fault tables that apply to a
 * backend that does not isolate).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* strcasestr */
#endif
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <event2/event.h>

#include "testutil.h"

#define MIB (1024 * 1024)

/* ---------------------------------------------------------------- helpers */

/* Options for |argv| (or |shell| when argv is NULL) with the defaults. */
static sbx_run_options opts(const char *const *argv, const char *shell)
{
	sbx_run_options o;

	sbx_run_options_init(&o);
	o.argv = argv;
	o.shell = shell;
	return o;
}

/* Runs |shell| through /bin/sh -c on a default passthrough sandbox. */
static sbx_result *run_shell(const char *shell, tu_call *c)
{
	sbx_run_options o = opts(NULL, shell);

	return tu_run(tu_sandbox(NULL, 0), &o, c);
}

/* Whether this build runs under AddressSanitizer. */
static bool under_asan(void)
{
#if defined(__SANITIZE_ADDRESS__)
	return true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
	return true;
#endif
#endif
	return false;
}

/* Fails unless |r| says the program exited with |code| and nothing else. */
static void assert_exited(const sbx_result *r, int code)
{
	ck_assert_msg(r->error == NULL, "unexpected start error: %s (errno %d)", r->error,
	              r->start_errno);
	ck_assert_msg(r->exited, "not exited: signal %d, timed_out %d, cancelled %d", r->signal,
	              r->timed_out, r->cancelled);
	ck_assert_int_eq(r->exit_code, code);
	ck_assert_int_eq(r->signal, 0);
	ck_assert(!r->timed_out);
	ck_assert(!r->cancelled);
	ck_assert_int_eq(r->start_errno, 0);
}

/* Fails unless stream |s| of |r| kept exactly |text| and nothing was cut. */
static void assert_stream(const sbx_result *r, enum sbx_stream s, const char *text)
{
	const sbx_output *out = &r->out[s];
	size_t len = strlen(text);

	ck_assert_ptr_nonnull(out->data);
	ck_assert_msg(out->len == len && memcmp(out->data, text, len) == 0,
	              "stream %d: expected \"%s\", got %zu bytes \"%.*s\"", (int)s, text, out->len,
	              (int)(out->len > 200 ? 200 : out->len), out->data);
	ck_assert_msg(out->data[out->len] == '\0', "kept bytes are not NUL-terminated");
	ck_assert_uint_eq(out->total, len);
	ck_assert(!out->truncated);
}

/* Fills |buf| with bytes of every value, NULs included, from a fixed seed. */
static void fill_bytes(unsigned char *buf, size_t len)
{
	uint32_t x = 2463534242u;

	for (size_t i = 0; i < len; i++) {
		x ^= x << 13;
		x ^= x >> 17;
		x ^= x << 5;
		buf[i] = (unsigned char)x;
	}
}

/* Starts every run of |calls| with the same options. */
static void start_all(sbx_sandbox *sb, const sbx_run_options *o, tu_call *calls, int n)
{
	for (int i = 0; i < n; i++)
		tu_start(sb, o, &calls[i]);
}

/* Dispatches until every run of |calls| called back, then asserts each did
 * so exactly once. */
static void wait_all(tu_call *calls, int n)
{
	for (;;) {
		int pending = 0, rc;

		for (int i = 0; i < n; i++)
			pending += calls[i].calls == 0;
		if (pending == 0)
			break;
		rc = event_base_loop(tu_base, EVLOOP_ONCE);
		ck_assert_msg(rc == 0, "the loop ran out of events with %d callbacks missing",
		              pending);
	}
	tu_spin_loop(3);
	for (int i = 0; i < n; i++)
		ck_assert_msg(calls[i].calls == 1, "run %d called back %d times", i, calls[i].calls);
}

static void done_all(tu_call *calls, int n)
{
	for (int i = 0; i < n; i++)
		tu_call_done(&calls[i]);
}

/* The callback must never fire: dispatch a while and check. */
static void assert_never_called(const tu_call *c)
{
	tu_spin_loop(20);
	ck_assert_msg(c->calls == 0, "the callback of a refused start fired");
}

/* ------------------------------------------------------- what a run reports */

START_TEST(run_reports_both_streams_and_exit_code)
{
	sbx_result *r;
	tu_call c;

	r = run_shell("echo out; echo err >&2; exit 3", &c);
	assert_exited(r, 3);
	assert_stream(r, SBX_STDOUT, "out\n");
	assert_stream(r, SBX_STDERR, "err\n");
	ck_assert(!r->isolated);
	ck_assert_str_eq(r->backend, "passthrough");
	ck_assert_double_gt(r->resources.wall_seconds, 0.0);
	ck_assert_double_lt(r->resources.wall_seconds, 10.0);
	ck_assert_double_ge(r->resources.cpu_user_seconds, 0.0);
	ck_assert_double_ge(r->resources.cpu_system_seconds, 0.0);
	ck_assert_ptr_nonnull(r->resources.peak_memory_source);
	ck_assert_str_eq(r->resources.peak_memory_source, "rusage");
	ck_assert_msg(r->resources.peak_memory_bytes > 0, "peak memory %lld",
	              (long long)r->resources.peak_memory_bytes);
	ck_assert_uint_eq(r->resources.limits_hit, 0);
	tu_call_done(&c);
}
END_TEST

/* 127 and 126 are exit codes like any other when the program chose them. */
static const int exit_codes[] = { 0, 1, 2, 126, 127, 128, 200, 255 };

START_TEST(run_exit_codes)
{
	char cmd[32];
	tu_call c;

	snprintf(cmd, sizeof(cmd), "exit %d", exit_codes[_i]);
	assert_exited(run_shell(cmd, &c), exit_codes[_i]);
	tu_call_done(&c);
}
END_TEST

START_TEST(run_signal_is_not_an_exit_code)
{
	sbx_result *r = NULL;
	tu_call c;

	r = run_shell("kill -TERM $$; sleep 5", &c);
	ck_assert_ptr_null(r->error);
	ck_assert(!r->exited);
	ck_assert_int_eq(r->exit_code, -1);
	ck_assert_int_eq(r->signal, SIGTERM);
	ck_assert(!r->timed_out);
	ck_assert(!r->cancelled);
	tu_call_done(&c);
}
END_TEST

/* ---------------------------------------------------- what the child gets */

START_TEST(run_argv_passed_intact)
{
	static const char *const args[] = { "a b",      "\"double\"", "'single'", "new\nline", "",
		                            "$HOME",    "*",          "-x",       "tab\there", "\\",
		                            "; exit 9", "ümlaut",     "", NULL };
	const char *argv[32];
	sbx_run_options o = opts(NULL, NULL);
	char expected[512];
	size_t len = 0;
	sbx_result *r;
	tu_cmd cmd;
	tu_call c;
	int n = 0;

	tu_helper(&o, &cmd, "argv", NULL, NULL);
	for (int i = 0; cmd.argv[i] != NULL; i++)
		argv[n++] = cmd.argv[i];
	for (int i = 0; args[i] != NULL; i++) {
		argv[n++] = args[i];
		memcpy(expected + len, args[i], strlen(args[i]) + 1);
		len += strlen(args[i]) + 1;
	}
	argv[n] = NULL;
	o.argv = argv;
	r = tu_run(tu_sandbox(NULL, 0), &o, &c);
	assert_exited(r, 0);
	ck_assert_uint_eq(r->out[SBX_STDOUT].len, len);
	ck_assert_mem_eq(r->out[SBX_STDOUT].data, expected, len);
	tu_call_done(&c);
}
END_TEST

START_TEST(run_bare_name_found_on_path)
{
	static const char *const argv[] = { "echo", "found", NULL };
	sbx_run_options o = opts(argv, NULL);
	sbx_result *r;
	tu_call c;

	r = tu_run(tu_sandbox(NULL, 0), &o, &c);
	assert_exited(r, 0);
	assert_stream(r, SBX_STDOUT, "found\n");
	tu_call_done(&c);
}
END_TEST

START_TEST(run_shell_string_through_sh)
{
	sbx_result *r;
	tu_call c;

	r = run_shell("echo \"$((6 * 7))\" | tr 4 X; echo \"$0\" >&2", &c);
	assert_exited(r, 0);
	assert_stream(r, SBX_STDOUT, "X2\n");
	ck_assert_msg(tu_contains(r->out[SBX_STDERR].data, "sh"), "$0 is %s",
	              r->out[SBX_STDERR].data);
	tu_call_done(&c);
}
END_TEST

START_TEST(run_cwd_honoured)
{
	static const char *const argv[] = { "/bin/pwd", "-P", NULL };
	sbx_run_options o = opts(argv, NULL);
	char real[PATH_MAX], expected[PATH_MAX + 2];
	sbx_result *r;
	tu_call c;

	ck_assert_ptr_nonnull(realpath(tu_tmpdir(), real));
	snprintf(expected, sizeof(expected), "%s\n", real);
	o.cwd = tu_tmpdir();
	r = tu_run(tu_sandbox(NULL, 0), &o, &c);
	assert_exited(r, 0);
	assert_stream(r, SBX_STDOUT, expected);
	tu_call_done(&c);
}
END_TEST

/* A working directory that does not exist is a refusal or a start error,
 * never an exit code. */
START_TEST(run_cwd_missing_is_not_an_exit_code)
{
	static const char *const argv[] = { "/bin/true", NULL };
	sbx_run_options o = opts(argv, NULL);
	sbx_sandbox *sb = tu_sandbox(NULL, 0);
	sbx_error err;
	tu_call c;
	int rc;

	memset(&c, 0, sizeof(c));
	memset(&err, 0, sizeof(err));
	o.cwd = "/nonexistent/sbx-test-cwd";
	rc = sbx_run_start(sb, &o, tu_call_cb, &c, &c.run, &err);
	if (rc < 0) {
		ck_assert_int_eq(err.code, rc);
		ck_assert(tu_contains(err.message, "/nonexistent/sbx-test-cwd"));
		assert_never_called(&c);
		return;
	}
	tu_wait(&c);
	ck_assert_ptr_nonnull(c.result->error);
	ck_assert(!c.result->exited);
	ck_assert_int_eq(c.result->exit_code, -1);
	ck_assert_int_eq(c.result->start_errno, ENOENT);
	tu_call_done(&c);
}
END_TEST

/* The child's environment is the policy's plus the run's, the run's winning;
 * the caller's own environment is not copied. */
START_TEST(run_environment_built_not_inherited)
{
	static const char *const argv[] = { "/usr/bin/env", NULL };
	static const char *const env[] = { "PB=run", "PC=run", NULL };
	sbx_policy *p = sbx_policy_new();
	sbx_run_options o = opts(argv, NULL);
	const char *out;
	sbx_result *r;
	tu_call c;
	int pb = 0;

	ck_assert_ptr_nonnull(p);
	ck_assert_int_eq(setenv("SBX_TEST_SECRET", "hunter2", 1), 0);
	ck_assert_int_eq(setenv("SBX_TEST_ALLOWED", "let-through", 1), 0);
	ck_assert_int_eq(sbx_policy_set_env(p, "PA=policy", NULL), 0);
	ck_assert_int_eq(sbx_policy_set_env(p, "PB=policy", NULL), 0);
	ck_assert_int_eq(sbx_policy_allow_env(p, "SBX_TEST_ALLOWED", NULL), 0);
	o.env = env;
	r = tu_run(tu_sandbox(p, 0), &o, &c);
	sbx_policy_free(p);
	assert_exited(r, 0);
	out = r->out[SBX_STDOUT].data;
	ck_assert_msg(tu_contains(out, "\nPA=policy\n") || strncmp(out, "PA=policy\n", 10) == 0,
	              "env: %s", out);
	ck_assert_msg(tu_contains(out, "PC=run\n"), "env: %s", out);
	ck_assert_msg(tu_contains(out, "SBX_TEST_ALLOWED=let-through\n"), "env: %s", out);
	/* Not printing |out| here: it would hold whatever else leaked. */
	ck_assert_msg(!tu_contains(out, "hunter2") && !tu_contains(out, "SBX_TEST_SECRET"),
	              "the caller's SBX_TEST_SECRET reached the child");
	ck_assert_msg(strncmp(out, "PATH=", 5) == 0 || tu_contains(out, "\nPATH="), "no PATH: %s",
	              out);
	for (const char *line = out; *line != '\0'; line = strchr(line, '\n') + 1) {
		ck_assert_msg(strchr(line, '\n') != NULL, "env output not line-terminated: %s", out);
		if (strncmp(line, "PB=", 3) == 0) {
			pb++;
			ck_assert_msg(strncmp(line, "PB=run\n", 7) == 0, "PB is not the run's: %s", out);
		}
	}
	ck_assert_msg(pb == 1, "PB appears %d times: %s", pb, out);
	tu_call_done(&c);
}
END_TEST

/* Only fds 0-2 reach the child, though the caller holds a secret file, a
 * pipe and the pipes of another run open without O_CLOEXEC. */
START_TEST(run_child_gets_only_std_fds)
{
	static const char *const sleeper[] = { "/bin/sleep", "5", NULL };
	sbx_run_options so = opts(sleeper, NULL);
	sbx_run_options o = opts(NULL, NULL);
	const char *secret = tu_write_file("secret", "key", 3, 0600);
	sbx_sandbox *sb = tu_sandbox(NULL, 0);
	int fd = open(secret, O_RDONLY); /* deliberately inheritable */
	int pipefd[2];
	tu_call other, c;
	tu_cmd cmd;

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pipe(pipefd), 0);
	tu_start(sb, &so, &other);
	tu_helper(&o, &cmd, "fds", NULL, NULL);
	tu_run(sb, &o, &c);
	assert_exited(c.result, 0);
	assert_stream(c.result, SBX_STDOUT, "0 1 2\n");
	tu_call_done(&c);
	sbx_run_cancel(other.run);
	tu_wait(&other);
	tu_call_done(&other);
	close(fd);
	close(pipefd[0]);
	close(pipefd[1]);
}
END_TEST

/* Each run is the leader of a session of its own, with no controlling tty. */
START_TEST(run_child_in_own_session)
{
	sbx_run_options o = opts(NULL, NULL);
	int pid, sid, pgid, tty_errno;
	tu_cmd cmd;
	tu_call c;

	tu_helper(&o, &cmd, "session", NULL, NULL);
	tu_run(tu_sandbox(NULL, 0), &o, &c);
	assert_exited(c.result, 0);
	ck_assert_int_eq(sscanf(c.result->out[SBX_STDOUT].data, "%d %d %d %d", &pid, &sid, &pgid,
	                        &tty_errno),
	                 4);
	ck_assert_int_eq(sid, pid);
	ck_assert_int_eq(pgid, pid);
	ck_assert_int_ne(sid, getsid(0));
	ck_assert_int_ne(tty_errno, 0);
	tu_call_done(&c);
}
END_TEST

/* The caller's blocked and ignored signals do not reach the child. */
START_TEST(run_child_signal_state_reset)
{
	sbx_run_options o = opts(NULL, NULL);
	unsigned long long blk = ~0ULL, ign = ~0ULL;
	const char *s;
	sigset_t set;
	tu_cmd cmd;
	tu_call c;

	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	sigaddset(&set, SIGTERM);
	ck_assert_int_eq(sigprocmask(SIG_BLOCK, &set, NULL), 0);
	signal(SIGUSR2, SIG_IGN);
	signal(SIGPIPE, SIG_IGN);
	signal(SIGINT, SIG_IGN);
	tu_helper(&o, &cmd, "sigstate", NULL, NULL);
	tu_run(tu_sandbox(NULL, 0), &o, &c);
	assert_exited(c.result, 0);
	s = c.result->out[SBX_STDOUT].data;
	ck_assert_msg(sscanf(strstr(s, "SigBlk:"), "SigBlk: %llx", &blk) == 1, "%s", s);
	ck_assert_msg(sscanf(strstr(s, "SigIgn:"), "SigIgn: %llx", &ign) == 1, "%s", s);
	ck_assert_msg(blk == 0, "the child starts with signals blocked: %s", s);
	ck_assert_msg((ign & ((1ULL << (SIGUSR2 - 1)) | (1ULL << (SIGPIPE - 1)) |
	                      (1ULL << (SIGINT - 1)))) == 0,
	              "the child inherits ignored signals: %s", s);
	tu_call_done(&c);
}
END_TEST

/* ------------------------------------------------------------------ stdin */

static sbx_result *run_with_stdin(const char *const *argv, const void *data, size_t len,
                                  size_t max_output, tu_call *c)
{
	sbx_run_options o = opts(argv, NULL);

	o.stdin_data = data;
	o.stdin_len = len;
	if (max_output != 0)
		o.max_output = max_output;
	return tu_run(tu_sandbox(NULL, 0), &o, c);
}

START_TEST(stdin_bytes_delivered)
{
	static const char *const cat[] = { "/bin/cat", NULL };
	static const char data[] = "hello\0world\n\xff";
	sbx_result *r;
	tu_call c;

	r = run_with_stdin(cat, data, sizeof(data) - 1, 0, &c);
	assert_exited(r, 0);
	ck_assert_uint_eq(r->out[SBX_STDOUT].len, sizeof(data) - 1);
	ck_assert_mem_eq(r->out[SBX_STDOUT].data, data, sizeof(data) - 1);
	tu_call_done(&c);
}
END_TEST

/* Stdin given as zero bytes is an immediate end-of-file. */
START_TEST(stdin_empty_is_eof)
{
	static const char *const cat[] = { "/bin/cat", NULL };
	sbx_result *r;
	tu_call c;

	r = run_with_stdin(cat, "", 0, 0, &c);
	assert_exited(r, 0);
	assert_stream(r, SBX_STDOUT, "");
	ck_assert_msg(tu_call_wall(&c) < 5.0, "cat waited %.1f s for its input", tu_call_wall(&c));
	tu_call_done(&c);
}
END_TEST

START_TEST(stdin_4mib_round_trips)
{
	static const char *const cat[] = { "/bin/cat", NULL };
	size_t len = 4 * MIB;
	unsigned char *data = malloc(len);
	sbx_result *r;
	tu_call c;

	ck_assert_ptr_nonnull(data);
	fill_bytes(data, len);
	r = run_with_stdin(cat, data, len, 5 * MIB, &c);
	assert_exited(r, 0);
	ck_assert_uint_eq(r->out[SBX_STDOUT].len, len);
	ck_assert_uint_eq(r->out[SBX_STDOUT].total, len);
	ck_assert(!r->out[SBX_STDOUT].truncated);
	ck_assert_msg(memcmp(r->out[SBX_STDOUT].data, data, len) == 0, "stdin came back changed");
	free(data);
	tu_call_done(&c);
}
END_TEST

/* A program that never reads its stdin and exits is no error, and the
 * caller does not die of SIGPIPE. */
START_TEST(stdin_unread_is_no_error)
{
	static const char *const tru[] = { "/bin/true", NULL };
	size_t len = 8 * MIB;
	unsigned char *data = calloc(1, len);
	tu_call c;

	ck_assert_ptr_nonnull(data);
	signal(SIGPIPE, SIG_DFL);
	assert_exited(run_with_stdin(tru, data, len, 0, &c), 0);
	free(data);
	tu_call_done(&c);
}
END_TEST

/* A child that closes stdin at once while 8 MiB are being fed: the write
 * fails with EPIPE, the caller (SIGPIPE at its default) lives on. */
START_TEST(stdin_closed_early_no_sigpipe)
{
	sbx_run_options o = opts(NULL, NULL);
	size_t len = 8 * MIB;
	unsigned char *data = calloc(1, len);
	tu_cmd cmd;
	tu_call c;

	ck_assert_ptr_nonnull(data);
	signal(SIGPIPE, SIG_DFL);
	tu_helper(&o, &cmd, "close-stdin-and-sleep", "0.5", NULL);
	o.stdin_data = data;
	o.stdin_len = len;
	tu_run(tu_sandbox(NULL, 0), &o, &c);
	assert_exited(c.result, 7);
	free(data);
	tu_call_done(&c);
}
END_TEST

START_TEST(stdin_null_is_dev_null)
{
	sbx_result *r;
	tu_call c;

	r = run_shell("readlink /proc/self/fd/0; cat", &c);
	assert_exited(r, 0);
	assert_stream(r, SBX_STDOUT, "/dev/null\n");
	tu_call_done(&c);
}
END_TEST

/* -------------------------------------------------- programs that cannot run */

enum { CANNOT_MISSING_PATH, CANNOT_MISSING_NAME, CANNOT_DASH, CANNOT_DIR, CANNOT_NOEXEC,
       CANNOT_GARBAGE, CANNOT_E2BIG, CANNOT_COUNT };

START_TEST(run_cannot_start)
{
	const char *argv[] = { NULL, "arg", NULL };
	sbx_run_options o = opts(argv, NULL);
	int want = ENOENT, also = ENOENT;
	char *huge = NULL;
	sbx_result *r;
	tu_call c;

	switch (_i) {
	case CANNOT_MISSING_PATH:
		argv[0] = "/nonexistent/sbx-no-such-program";
		break;
	case CANNOT_MISSING_NAME:
		argv[0] = "sbx-no-such-program-on-path";
		break;
	case CANNOT_DASH: /* taken literally, not as an option of anything */
		argv[0] = "-sbx-dash";
		break;
	case CANNOT_DIR:
		argv[0] = tu_tmpdir();
		want = EACCES;
		also = EISDIR;
		break;
	case CANNOT_NOEXEC:
		argv[0] = tu_write_file("noexec.sh", "#!/bin/sh\necho ran\n", 19, 0644);
		want = also = EACCES;
		break;
	case CANNOT_GARBAGE:
		argv[0] = tu_write_file("garbage", "\x01\x02\x03\x04garbage\n", 12, 0755);
		want = also = ENOEXEC;
		break;
	case CANNOT_E2BIG: /* one argument longer than the kernel takes */
		if (tu_under_valgrind())
			return; /* valgrind's child dies of the failed execve() */
		huge = malloc(256 * 1024);
		ck_assert_ptr_nonnull(huge);
		memset(huge, 'x', 256 * 1024 - 1);
		huge[256 * 1024 - 1] = '\0';
		argv[0] = "/bin/echo";
		argv[1] = huge;
		want = also = E2BIG;
		break;
	}
	r = tu_run(tu_sandbox(NULL, 0), &o, &c);
	ck_assert_msg(r->error != NULL && r->error[0] != '\0', "%s: no start error (exited %d, code %d)",
	              argv[0], r->exited, r->exit_code);
	ck_assert_msg(tu_contains(r->error, argv[0]), "the error \"%s\" does not name %s", r->error,
	              argv[0]);
	ck_assert(!r->exited);
	ck_assert_int_eq(r->exit_code, -1);
	ck_assert_int_eq(r->signal, 0);
	ck_assert(!r->timed_out);
	ck_assert(!r->cancelled);
	ck_assert_msg(r->start_errno == want || r->start_errno == also,
	              "%s: start_errno %d (%s), expected %s", argv[0], r->start_errno,
	              strerror(r->start_errno), strerror(want));
	ck_assert_uint_eq(r->out[SBX_STDOUT].total, 0);
	ck_assert_str_eq(r->backend, "passthrough");
	free(huge);
	tu_call_done(&c);
}
END_TEST

/* Options that cannot describe a run are refused by the start call, which
 * then never calls back and leaves nothing behind. */
enum { BAD_BOTH, BAD_NEITHER, BAD_EMPTY_ARGV, BAD_RELATIVE_CWD, BAD_ENV, BAD_TIMEOUT_NEG,
       BAD_TIMEOUT_NAN, BAD_NO_CALLBACK, BAD_COUNT };

START_TEST(run_bad_options_refused)
{
	static const char *const argv[] = { "/bin/true", NULL };
	static const char *const empty[] = { NULL };
	static const char *const env[] = { "NOEQUALS", NULL };
	sbx_run_options o = opts(argv, NULL);
	sbx_sandbox *sb = tu_sandbox(NULL, 0);
	sbx_error err;
	tu_call c;
	int rc;

	switch (_i) {
	case BAD_BOTH:
		o.shell = "true";
		break;
	case BAD_NEITHER:
		o.argv = NULL;
		break;
	case BAD_EMPTY_ARGV:
		o.argv = empty;
		break;
	case BAD_RELATIVE_CWD:
		o.cwd = "relative/dir";
		break;
	case BAD_ENV:
		o.env = env;
		break;
	case BAD_TIMEOUT_NEG:
		o.timeout = -1;
		break;
	case BAD_TIMEOUT_NAN:
		o.timeout = NAN;
		break;
	}
	memset(&c, 0, sizeof(c));
	memset(&err, 0, sizeof(err));
	rc = sbx_run_start(sb, &o, _i == BAD_NO_CALLBACK ? NULL : tu_call_cb, &c, &c.run, &err);
	ck_assert_msg(rc < 0, "case %d accepted", _i);
	ck_assert_int_eq(err.code, rc);
	ck_assert_msg(err.message[0] != '\0', "case %d: no message", _i);
	if (_i == BAD_RELATIVE_CWD)
		ck_assert(tu_contains(err.message, "relative/dir"));
	if (_i == BAD_ENV)
		ck_assert(tu_contains(err.message, "NOEQUALS"));
	assert_never_called(&c);
}
END_TEST

/* ---------------------------------------------------------------- endings */

START_TEST(timeout_kills)
{
	char token[32];
	const char *argv[] = { "/bin/sleep", token, NULL };
	sbx_run_options o = opts(argv, NULL);
	sbx_result *r;
	tu_call c;

	tu_token(token, sizeof(token), "30");
	o.timeout = 1;
	r = tu_run(tu_sandbox(NULL, 0), &o, &c);
	ck_assert(r->timed_out);
	ck_assert(!r->exited);
	ck_assert(!r->cancelled);
	ck_assert_int_eq(r->exit_code, -1);
	ck_assert_msg(r->signal == SIGKILL || r->signal == SIGTERM, "signal %d", r->signal);
	ck_assert_ptr_null(r->error);
	ck_assert_msg(tu_call_wall(&c) >= 0.9 && tu_call_wall(&c) < 3.0, "ended after %.2f s",
	              tu_call_wall(&c));
	ck_assert_double_ge(r->resources.wall_seconds, 0.9);
	ck_assert_msg(tu_find_proc(token) == 0, "the sleep survived its timeout");
	tu_call_done(&c);
}
END_TEST

START_TEST(timeout_kills_a_sigterm_ignorer)
{
	sbx_run_options o = opts(NULL, NULL);
	char token[32];
	sbx_result *r;
	tu_cmd cmd;
	tu_call c;

	tu_token(token, sizeof(token), "ignore-term");
	tu_helper(&o, &cmd, "ignore-term", token, NULL);
	o.timeout = 1;
	r = tu_run(tu_sandbox(NULL, 0), &o, &c);
	ck_assert(r->timed_out);
	ck_assert(!r->exited);
	ck_assert_int_eq(r->signal, SIGKILL);
	assert_stream(r, SBX_STDOUT, "ready\n");
	ck_assert_msg(tu_call_wall(&c) < 6.0, "ended after %.2f s", tu_call_wall(&c));
	ck_assert(tu_find_proc(token) == 0);
	tu_call_done(&c);
}
END_TEST

/* A descendant in a session of its own, whose parent still runs, is found
 * through the process tree and killed with it. */
START_TEST(timeout_kills_detached_descendants)
{
	char token[32], cmd[96];
	sbx_run_options o = opts(NULL, NULL);
	sbx_result *r;
	tu_call c;

	tu_token(token, sizeof(token), "103");
	snprintf(cmd, sizeof(cmd), "setsid sleep %s & wait", token);
	o.shell = cmd;
	o.timeout = 1;
	r = tu_run(tu_sandbox(NULL, 0), &o, &c);
	ck_assert(r->timed_out);
	ck_assert(!r->exited);
	ck_assert_msg(tu_call_wall(&c) < 3.0, "ended after %.2f s", tu_call_wall(&c));
	ck_assert_msg(tu_wait_gone(token, 1.0), "the setsid descendant survived the timeout");
	tu_call_done(&c);
}
END_TEST

START_TEST(timeout_zero_is_none)
{
	static const char *const argv[] = { "/bin/sleep", "1.2", NULL };
	sbx_run_options o = opts(argv, NULL);
	tu_call c;

	o.timeout = 0;
	assert_exited(tu_run(tu_sandbox(NULL, 0), &o, &c), 0);
	ck_assert_double_ge(tu_call_wall(&c), 1.1);
	tu_call_done(&c);
}
END_TEST

/* A background process left in the run's group, holding the pipes or not:
 * the result still comes within a second of the shell's exit, and the
 * process is killed with the run. */
static const char *const background_cmds[] = {
	"sleep %s & echo done",
	"sleep %s >/dev/null 2>&1 </dev/null & echo done",
};

START_TEST(background_child_cannot_hold_the_run)
{
	char token[32], cmd[96];
	sbx_result *r;
	tu_call c;

	tu_token(token, sizeof(token), "100");
	snprintf(cmd, sizeof(cmd), background_cmds[_i], token);
	r = run_shell(cmd, &c);
	assert_exited(r, 0);
	assert_stream(r, SBX_STDOUT, "done\n");
	ck_assert_msg(tu_call_wall(&c) < 1.5, "the result came %.2f s after the start",
	              tu_call_wall(&c));
	ck_assert_msg(tu_wait_gone(token, 1.0), "the background sleep survived the run");
	tu_call_done(&c);
}
END_TEST

/* A grandchild in a session of its own holds the pipes: the run still ends
 * promptly.  (Once its parent is gone nothing links it to the run on an
 * unisolated backend, so it is the test that kills it.) */
START_TEST(detached_grandchild_cannot_hold_the_run)
{
	char token[32], cmd[96];
	sbx_result *r;
	tu_call c;

	tu_token(token, sizeof(token), "101");
	/* The pause lets the grandchild leave the group before the shell exits. */
	snprintf(cmd, sizeof(cmd), "setsid sleep %s & sleep 0.3; echo done", token);
	r = run_shell(cmd, &c);
	tu_kill_token(token);
	assert_exited(r, 0);
	ck_assert_msg(tu_contains(r->out[SBX_STDOUT].data, "done\n"), "stdout: %s",
	              r->out[SBX_STDOUT].data);
	ck_assert_msg(tu_call_wall(&c) < 1.5, "the result came %.2f s after the start",
	              tu_call_wall(&c));
	tu_call_done(&c);
}
END_TEST

/* EOF on both pipes is not the end: the run ends when the process does. */
START_TEST(closed_stdout_does_not_end_the_run)
{
	sbx_result *r;
	tu_call c;

	r = run_shell("exec >&- 2>&-; sleep 1; exit 4", &c);
	assert_exited(r, 4);
	ck_assert_uint_eq(r->out[SBX_STDOUT].total, 0);
	ck_assert_msg(tu_call_wall(&c) >= 0.9 && tu_call_wall(&c) < 3.0, "ended after %.2f s",
	              tu_call_wall(&c));
	tu_call_done(&c);
}
END_TEST

/* ----------------------------------------------------------------- output */

static void on_output_count(enum sbx_stream s, const char *data, size_t len, void *arg)
{
	uint64_t *counts = arg;

	ck_assert(s == SBX_STDOUT || s == SBX_STDERR);
	ck_assert(len > 0 && data != NULL);
	counts[s] += len;
}

/* `yes` for two seconds with 1 KiB kept: exactly 1 KiB kept, everything
 * counted, and the supervisor's memory stays flat. */
START_TEST(output_cap_endless_output)
{
	static const char *const argv[] = { "/usr/bin/yes", NULL };
	sbx_run_options o = opts(argv, NULL);
	uint64_t seen[2] = { 0, 0 };
	sbx_sandbox *sb = tu_sandbox(NULL, 0);
	long rss_before, rss_after;
	sbx_result *r;
	tu_call c;

	o.max_output = 1024;
	o.timeout = 2;
	o.on_output = on_output_count;
	o.on_output_arg = seen;
	rss_before = tu_rss_kib();
	r = tu_run(sb, &o, &c);
	rss_after = tu_rss_kib();
	ck_assert(r->timed_out);
	ck_assert_uint_eq(r->out[SBX_STDOUT].len, 1024);
	ck_assert(r->out[SBX_STDOUT].truncated);
	ck_assert_msg(r->out[SBX_STDOUT].total > 16 * MIB, "only %llu bytes read in 2 s",
	              (unsigned long long)r->out[SBX_STDOUT].total);
	for (int i = 0; i < 1024; i += 2)
		ck_assert_msg(r->out[SBX_STDOUT].data[i] == 'y' && r->out[SBX_STDOUT].data[i + 1] == '\n',
		              "kept bytes are not the first ones");
	ck_assert(r->out[SBX_STDOUT].data[1024] == '\0');
	ck_assert_msg(r->resources.limits_hit & (1u << SBX_HIT_OUTPUT), "limits_hit %#x",
	              r->resources.limits_hit);
	ck_assert_msg(seen[SBX_STDOUT] == r->out[SBX_STDOUT].total,
	              "on_output saw %llu bytes of %llu", (unsigned long long)seen[SBX_STDOUT],
	              (unsigned long long)r->out[SBX_STDOUT].total);
	/* Growth with the output would be gigabytes; AddressSanitizer's own
	 * allocator and shadow take a few tens of MiB of their own. */
	ck_assert_msg(rss_after - rss_before < (under_asan() ? 64 : 20) * 1024,
	              "the supervisor grew by %ld KiB while %llu bytes went by", rss_after - rss_before,
	              (unsigned long long)r->out[SBX_STDOUT].total);
	tu_call_done(&c);
}
END_TEST

/* Exact totals on both streams past their caps. */
START_TEST(output_cap_each_stream)
{
	sbx_run_options o =
		opts(NULL, "head -c 3000000 /dev/zero; head -c 5000 /dev/zero | tr '\\0' e >&2");
	sbx_result *r;
	tu_call c;

	o.max_output = 1000;
	r = tu_run(tu_sandbox(NULL, 0), &o, &c);
	assert_exited(r, 0);
	ck_assert_uint_eq(r->out[SBX_STDOUT].len, 1000);
	ck_assert_uint_eq(r->out[SBX_STDOUT].total, 3000000);
	ck_assert(r->out[SBX_STDOUT].truncated);
	ck_assert_uint_eq(r->out[SBX_STDERR].len, 1000);
	ck_assert_uint_eq(r->out[SBX_STDERR].total, 5000);
	ck_assert(r->out[SBX_STDERR].truncated);
	for (int i = 0; i < 1000; i++) {
		ck_assert(r->out[SBX_STDOUT].data[i] == '\0');
		ck_assert(r->out[SBX_STDERR].data[i] == 'e');
	}
	ck_assert(r->resources.limits_hit & (1u << SBX_HIT_OUTPUT));
	tu_call_done(&c);
}
END_TEST

/* Exactly max_output bytes is not truncation; one more is. */
static const int cap_boundary[] = { 999, 1000, 1001 };

START_TEST(output_cap_boundary)
{
	int n = cap_boundary[_i];
	sbx_run_options o;
	char cmd[64];
	sbx_result *r;
	tu_call c;

	snprintf(cmd, sizeof(cmd), "head -c %d /dev/zero | tr '\\0' b", n);
	o = opts(NULL, cmd);
	o.max_output = 1000;
	r = tu_run(tu_sandbox(NULL, 0), &o, &c);
	assert_exited(r, 0);
	ck_assert_uint_eq(r->out[SBX_STDOUT].total, (uint64_t)n);
	ck_assert_uint_eq(r->out[SBX_STDOUT].len, n > 1000 ? 1000 : (size_t)n);
	ck_assert(r->out[SBX_STDOUT].truncated == (n > 1000));
	ck_assert(((r->resources.limits_hit >> SBX_HIT_OUTPUT) & 1u) == (n > 1000));
	ck_assert(r->out[SBX_STDOUT].data[r->out[SBX_STDOUT].len] == '\0');
	tu_call_done(&c);
}
END_TEST

/* Both pipes drained at once: a program that fills stderr while we would be
 * waiting on stdout does not deadlock; under the cap nothing is cut. */
START_TEST(output_large_both_streams_kept)
{
	sbx_run_options o = opts(NULL, "head -c 3000000 /dev/zero | tr '\\0' o; "
	                               "head -c 2000000 /dev/zero | tr '\\0' e >&2; "
	                               "head -c 1000000 /dev/zero | tr '\\0' o");
	sbx_result *r;
	tu_call c;

	o.max_output = 8 * MIB;
	r = tu_run(tu_sandbox(NULL, 0), &o, &c);
	assert_exited(r, 0);
	ck_assert_uint_eq(r->out[SBX_STDOUT].len, 4000000);
	ck_assert_uint_eq(r->out[SBX_STDOUT].total, 4000000);
	ck_assert(!r->out[SBX_STDOUT].truncated);
	ck_assert_uint_eq(r->out[SBX_STDERR].len, 2000000);
	ck_assert(!r->out[SBX_STDERR].truncated);
	ck_assert_ptr_null(memchr(r->out[SBX_STDOUT].data, 'e', 4000000));
	ck_assert_ptr_null(memchr(r->out[SBX_STDERR].data, 'o', 2000000));
	ck_assert_uint_eq(r->resources.limits_hit & (1u << SBX_HIT_OUTPUT), 0);
	tu_call_done(&c);
}
END_TEST

/* on_output sees every byte in order, kept or not. */
struct collect {
	char *buf;
	size_t len, cap;
	uint64_t err_bytes;
};

static void on_output_collect(enum sbx_stream s, const char *data, size_t len, void *arg)
{
	struct collect *col = arg;

	if (s == SBX_STDERR) {
		col->err_bytes += len;
		return;
	}
	if (col->len + len > col->cap) {
		col->cap = (col->len + len) * 2;
		col->buf = realloc(col->buf, col->cap);
		ck_assert_ptr_nonnull(col->buf);
	}
	memcpy(col->buf + col->len, data, len);
	col->len += len;
}

START_TEST(on_output_sees_every_byte)
{
	sbx_run_options o = opts(NULL, "seq 1 200000; seq 1 1000 >&2");
	struct collect col = { NULL, 0, 0, 0 };
	size_t explen = 0;
	char *expected = malloc(2 * MIB);
	sbx_result *r;
	tu_call c;

	ck_assert_ptr_nonnull(expected);
	for (int i = 1; i <= 200000; i++)
		explen += (size_t)sprintf(expected + explen, "%d\n", i);
	o.max_output = 4096;
	o.on_output = on_output_collect;
	o.on_output_arg = &col;
	r = tu_run(tu_sandbox(NULL, 0), &o, &c);
	assert_exited(r, 0);
	ck_assert_uint_eq(r->out[SBX_STDOUT].total, explen);
	ck_assert_uint_eq(col.len, explen);
	ck_assert_msg(memcmp(col.buf, expected, explen) == 0, "on_output saw other bytes");
	ck_assert_uint_eq(r->out[SBX_STDOUT].len, 4096);
	ck_assert_mem_eq(r->out[SBX_STDOUT].data, expected, 4096);
	ck_assert_uint_eq(col.err_bytes, r->out[SBX_STDERR].total);
	ck_assert(!r->out[SBX_STDERR].truncated);
	free(col.buf);
	free(expected);
	tu_call_done(&c);
}
END_TEST

/* on_output may cancel its own run. */
static void on_output_cancel(enum sbx_stream s, const char *data, size_t len, void *arg)
{
	tu_call *c = arg;

	ck_assert_msg(c->calls == 0, "output after the callback");
	sbx_run_cancel(c->run);
}

START_TEST(on_output_may_cancel)
{
	static const char *const argv[] = { "/usr/bin/yes", NULL };
	sbx_run_options o = opts(argv, NULL);
	tu_call c;

	o.timeout = 0;
	o.on_output = on_output_cancel;
	o.on_output_arg = &c;
	tu_run(tu_sandbox(NULL, 0), &o, &c);
	ck_assert(c.result->cancelled);
	ck_assert(!c.result->exited);
	ck_assert(!c.result->timed_out);
	ck_assert_uint_gt(c.result->out[SBX_STDOUT].total, 0);
	tu_call_done(&c);
}
END_TEST

/* ------------------------------------------------------------------ cancel */

START_TEST(cancel_kills_once)
{
	char token[32];
	const char *argv[] = { "/bin/sleep", token, NULL };
	sbx_run_options o = opts(argv, NULL);
	int pid;
	tu_call c;

	tu_token(token, sizeof(token), "30");
	tu_start(tu_sandbox(NULL, 0), &o, &c);
	pid = tu_loop_until_proc(token, 5.0);
	ck_assert_int_eq(sbx_run_pid(c.run), pid);
	sbx_run_cancel(c.run);
	sbx_run_cancel(c.run);
	tu_wait(&c);
	ck_assert(c.result->cancelled);
	ck_assert(!c.result->exited);
	ck_assert(!c.result->timed_out);
	ck_assert_int_eq(c.result->exit_code, -1);
	ck_assert_ptr_null(c.result->error);
	ck_assert_msg(tu_call_wall(&c) < 5.0, "cancel took %.2f s", tu_call_wall(&c));
	ck_assert_msg(tu_find_proc(token) == 0, "the cancelled sleep survived");
	ck_assert_int_eq(kill(pid, 0), -1);
	tu_call_done(&c);
}
END_TEST

/* A command that has ended by itself while its output is still drained (a
 * detached grandchild holds the pipe) keeps its own ending when cancelled. */
START_TEST(cancel_while_draining_keeps_the_exit)
{
	char token[32], cmd[128];
	sbx_run_options o;
	tu_call c;

	tu_token(token, sizeof(token), "102");
	snprintf(cmd, sizeof(cmd), "setsid sleep %s & sleep 0.3; exit 3", token);
	o = opts(NULL, cmd);
	tu_start(tu_sandbox(NULL, 0), &o, &c);
	tu_loop_until_proc(token, 5.0);
	/* The pid reads 0 once the shell has exited and the run drains. */
	while (c.calls == 0 && sbx_run_pid(c.run) != 0)
		event_base_loop(tu_base, EVLOOP_ONCE);
	ck_assert_int_eq(c.calls, 0);
	sbx_run_cancel(c.run);
	tu_wait(&c);
	tu_kill_token(token);
	assert_exited(c.result, 3);
	ck_assert(!c.result->cancelled);
	tu_call_done(&c);
}
END_TEST

/* Cancelled before the loop ever ran; and a run still waiting in the queue. */
START_TEST(cancel_before_loop_and_in_queue)
{
	static const char *const argv[] = { "/bin/sleep", "30", NULL };
	sbx_run_options o = opts(argv, NULL);
	sbx_sandbox *sb = tu_sandbox(NULL, 1);
	tu_call c[3];

	start_all(sb, &o, c, 3);
	for (int i = 0; i < 3; i++)
		sbx_run_cancel(c[i].run);
	sbx_run_cancel(c[2].run);
	wait_all(c, 3);
	for (int i = 0; i < 3; i++) {
		ck_assert_msg(c[i].result->cancelled, "run %d not cancelled", i);
		ck_assert(!c[i].result->exited);
		ck_assert_msg(tu_call_wall(&c[i]) < 5.0, "run %d: cancel took %.2f s", i,
		              tu_call_wall(&c[i]));
	}
	done_all(c, 3);
}
END_TEST

/* ------------------------------------------------------- many runs at once */

START_TEST(thousand_concurrent_runs)
{
	enum { N = 1000 };
	tu_call *c = calloc(N, sizeof(*c));
	sbx_run_options o;
	sbx_sandbox *sb;
	tu_fds before, after;

	/* libevent's select backend (EVENT_NOEPOLL and EVENT_NOPOLL set) cannot
	 * watch an fd above FD_SETSIZE, which a thousand runs need. */
	if (strcmp(event_base_get_method(tu_base), "select") == 0) {
		free(c);
		return;
	}
	ck_assert_ptr_nonnull(c);
	ck_assert_msg(tu_raise_nofile() >= 4 * N, "this test needs a hard RLIMIT_NOFILE of %d", 4 * N);
	/* No queue: all of them are spawned, and in flight, before the loop
	 * first runs. */
	sb = tu_sandbox(NULL, N);
	tu_fds_snapshot(&before);
	for (int i = 0; i < N; i++) {
		char cmd[32];

		snprintf(cmd, sizeof(cmd), "exit %d", i % 7);
		o = opts(NULL, cmd);
		tu_start(sb, &o, &c[i]);
	}
	wait_all(c, N);
	for (int i = 0; i < N; i++) {
		ck_assert_msg(c[i].result->exited && c[i].result->exit_code == i % 7,
		              "run %d: exited %d code %d error %s", i, c[i].result->exited,
		              c[i].result->exit_code, c[i].result->error ? c[i].result->error : "-");
	}
	done_all(c, N);
	tu_fds_snapshot(&after);
	tu_fds_assert_same(&before, &after, "after 1000 runs");
	tu_fds_free(&before);
	tu_fds_free(&after);
	free(c);
}
END_TEST

START_TEST(queue_max_starting_one)
{
	enum { N = 50 };
	sbx_sandbox *sb = tu_sandbox(NULL, 1);
	tu_call c[N];

	for (int i = 0; i < N; i++) {
		char cmd[32];
		sbx_run_options o;

		snprintf(cmd, sizeof(cmd), "echo %d; exit %d", i, i % 5);
		o = opts(NULL, cmd);
		tu_start(sb, &o, &c[i]);
	}
	wait_all(c, N);
	for (int i = 0; i < N; i++) {
		char line[32];

		snprintf(line, sizeof(line), "%d\n", i);
		assert_exited(c[i].result, i % 5);
		assert_stream(c[i].result, SBX_STDOUT, line);
	}
	done_all(c, N);
}
END_TEST

/* Abusive runs (endless writers, spinners) do not starve a small run
 * started after them: it finishes while they still run. */
START_TEST(abusive_runs_do_not_starve_the_loop)
{
	enum { N = 8 };
	static const char *const echo[] = { "/bin/echo", "fine", NULL };
	sbx_run_options o = opts(NULL, NULL);
	sbx_sandbox *sb = tu_sandbox(NULL, 0);
	tu_call bad[N], good;
	tu_cmd cmd;

	for (int i = 0; i < N; i++) {
		tu_helper(&o, &cmd, i % 4 == 3 ? "spin" : "write-forever", NULL, NULL);
		o.timeout = 30; /* they are cancelled long before */
		o.max_output = 4096;
		tu_start(sb, &o, &bad[i]);
	}
	tu_spin_loop(20);
	o = opts(echo, NULL);
	tu_run(sb, &o, &good);
	assert_exited(good.result, 0);
	assert_stream(good.result, SBX_STDOUT, "fine\n");
	for (int i = 0; i < N; i++) {
		const sbx_result *b = bad[i].result;

		ck_assert_msg(bad[i].calls == 0,
		              "abusive run %d ended before the small one (after %.2f s: exited %d, "
		              "code %d, signal %d, timed out %d, error %s)",
		              i, tu_call_wall(&bad[i]), b->exited, b->exit_code, b->signal, b->timed_out,
		              b->error ? b->error : "-");
		sbx_run_cancel(bad[i].run);
	}
	wait_all(bad, N);
	for (int i = 0; i < N; i++)
		ck_assert(bad[i].result->cancelled);
	done_all(bad, N);
	tu_call_done(&good);
}
END_TEST

/* ------------------------------------------- the host process's own business */

/* A child the host started itself is neither reaped nor disturbed, and no
 * SIGCHLD handler appears. */
START_TEST(host_child_not_reaped)
{
	static const char *const argv[] = { "/bin/sleep", "1", NULL };
	sbx_run_options o = opts(argv, NULL);
	struct sigaction sa;
	tu_call c[3];
	int st = 0;
	pid_t mine;

	mine = fork();
	ck_assert_int_ge(mine, 0);
	if (mine == 0) {
		usleep(300 * 1000);
		_exit(42);
	}
	start_all(tu_sandbox(NULL, 0), &o, c, 3);
	ck_assert_int_eq(sigaction(SIGCHLD, NULL, &sa), 0);
	ck_assert_msg(sa.sa_handler == SIG_DFL, "a SIGCHLD handler was installed");
	wait_all(c, 3);
	for (int i = 0; i < 3; i++)
		assert_exited(c[i].result, 0);
	done_all(c, 3);
	tu_sandbox_free();
	ck_assert_msg(waitpid(mine, &st, 0) == mine, "the host's child was reaped by someone else: %s",
	              strerror(errno));
	ck_assert(WIFEXITED(st));
	ck_assert_int_eq(WEXITSTATUS(st), 42);
	ck_assert_int_eq(sigaction(SIGCHLD, NULL, &sa), 0);
	ck_assert(sa.sa_handler == SIG_DFL);
}
END_TEST

/* ------------------------------------------------- freeing with runs in flight */

struct freeing {
	sbx_sandbox *sb;
	tu_call restart;
	int calls;
	bool cancelled;
	int restart_rc;
	int restart_err;
	bool ready;
};

static void freeing_cb(sbx_result *r, void *arg)
{
	struct freeing *f = arg;
	static const char *const argv[] = { "/bin/true", NULL };
	sbx_run_options o = opts(argv, NULL);
	sbx_error err;

	f->calls++;
	f->cancelled = r->cancelled;
	memset(&err, 0, sizeof(err));
	f->restart_rc = sbx_run_start(f->sb, &o, tu_call_cb, &f->restart, NULL, &err);
	f->restart_err = err.code;
	sbx_result_free(r);
}

static void freeing_ready(enum sbx_stream s, const char *data, size_t len, void *arg)
{
	struct freeing *f = arg;

	f->ready = true;
}

START_TEST(sandbox_free_with_runs_in_flight)
{
	char tok_term[32], tok_setsid[32], tok_write[32], shell[96];
	struct freeing f[3];
	sbx_run_options o = opts(NULL, NULL);
	sbx_sandbox *sb = tu_sandbox(NULL, 0);
	double t0;
	tu_cmd cmd;
	int rc;

	memset(f, 0, sizeof(f));
	tu_token(tok_term, sizeof(tok_term), "ignore-term");
	tu_token(tok_setsid, sizeof(tok_setsid), "102");
	tu_token(tok_write, sizeof(tok_write), "write-forever");
	for (int i = 0; i < 3; i++) {
		sbx_error err;

		f[i].sb = sb;
		if (i == 0)
			tu_helper(&o, &cmd, "ignore-term", tok_term, NULL);
		else if (i == 1) {
			snprintf(shell, sizeof(shell), "setsid sleep %s & echo started; wait", tok_setsid);
			o = opts(NULL, shell);
		} else
			tu_helper(&o, &cmd, "write-forever", tok_write, NULL);
		o.timeout = 0;
		o.on_output = freeing_ready;
		o.on_output_arg = &f[i];
		memset(&err, 0, sizeof(err));
		rc = sbx_run_start(sb, &o, freeing_cb, &f[i], NULL, &err);
		ck_assert_msg(rc == 0, "%s", err.message);
	}
	/* Every program has shown it runs (and the ignorer ignores SIGTERM). */
	for (t0 = tu_now(); !(f[0].ready && f[1].ready && f[2].ready);) {
		ck_assert_msg(tu_now() - t0 < 10, "the runs did not start");
		event_base_loop(tu_base, EVLOOP_ONCE | EVLOOP_NONBLOCK);
		usleep(5000);
	}
	tu_loop_until_proc(tok_setsid, 5.0);

	t0 = tu_now();
	tu_sandbox_free();
	for (int i = 0; i < 3; i++) {
		ck_assert_msg(f[i].calls == 1, "run %d called back %d times inside sbx_sandbox_free", i,
		              f[i].calls);
		ck_assert_msg(f[i].cancelled, "run %d not marked cancelled", i);
		ck_assert_int_eq(f[i].restart_rc, SBX_ECLOSED);
		ck_assert_int_eq(f[i].restart_err, SBX_ECLOSED);
		ck_assert_int_eq(f[i].restart.calls, 0);
	}
	ck_assert_int_eq(event_base_get_num_events(tu_base, EVENT_BASE_COUNT_ADDED), 0);
	ck_assert_msg(tu_find_proc(tok_term) == 0, "the SIGTERM ignorer survived");
	ck_assert_msg(tu_find_proc(tok_write) == 0, "the writer survived");
	ck_assert_msg(tu_wait_gone(tok_setsid, 1.0), "the setsid grandchild survived");
	ck_assert_msg(tu_now() - t0 < 10, "sbx_sandbox_free took %.1f s", tu_now() - t0);
	/* Nothing fires later from the loop. */
	tu_spin_loop(10);
	for (int i = 0; i < 3; i++) {
		ck_assert_int_eq(f[i].calls, 1);
		ck_assert_int_eq(f[i].restart.calls, 0);
	}
}
END_TEST

/* ------------------------------------------------------------------- faults */

/* Sets the soft RLIMIT_NOFILE so that exactly |k| fd numbers below it are
 * free. */
static void limit_free_fds(int k)
{
	struct rlimit rl;
	int free_seen = 0, fd;

	for (fd = 0;; fd++) {
		if (fcntl(fd, F_GETFD) < 0 && errno == EBADF) {
			if (free_seen == k)
				break;
			free_seen++;
		}
	}
	ck_assert_int_eq(getrlimit(RLIMIT_NOFILE, &rl), 0);
	rl.rlim_cur = (rlim_t)fd;
	ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &rl), 0);
}

/*
 * With the fd table nearly full the start call fails with -EMFILE at every
 * step that needs an fd: no callback, no fd, no child left.  Each k lets
 * the start get one fd further.
 */
START_TEST(emfile_on_start_leaves_nothing)
{
	static const char *const argv[] = { "/bin/true", NULL };
	static const char data[] = "input";
	sbx_run_options o = opts(argv, NULL);
	sbx_sandbox *sb = tu_sandbox(NULL, 0);
	struct rlimit saved;
	int refused = 0, started = 0;
	tu_fds before, now;
	tu_call c;

	/* Stdin data needs a pipe too. */
	o.stdin_data = data;
	o.stdin_len = sizeof(data) - 1;
	assert_exited(tu_run(sb, &o, &c), 0);
	tu_call_done(&c);
	ck_assert_int_eq(getrlimit(RLIMIT_NOFILE, &saved), 0);
	tu_fds_snapshot(&before);
	for (int k = 0; k <= 24; k++) {
		sbx_error err;
		int rc;

		memset(&c, 0, sizeof(c));
		memset(&err, 0, sizeof(err));
		limit_free_fds(k);
		rc = sbx_run_start(sb, &o, tu_call_cb, &c, &c.run, &err);
		ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &saved), 0);
		if (rc < 0) {
			int st, pid;

			refused++;
			ck_assert_msg(rc == -EMFILE, "k=%d: %d (%s) %s", k, rc, sbx_strerror(rc),
			              err.message);
			ck_assert_int_eq(err.code, rc);
			ck_assert(err.message[0] != '\0');
			assert_never_called(&c);
			pid = waitpid(-1, &st, WNOHANG);
			ck_assert_msg(pid == -1 && errno == ECHILD,
			              "k=%d: a child was left behind by a failed start", k);
		} else {
			started++;
			tu_wait(&c);
			assert_exited(c.result, 0);
			tu_call_done(&c);
		}
		tu_fds_snapshot(&now);
		tu_fds_assert_same(&before, &now, rc < 0 ? "after a refused start" : "after a run");
		tu_fds_free(&now);
	}
	ck_assert_msg(refused > 0, "no start was refused with no fd free");
	ck_assert_msg(started > 0, "no start succeeded with 24 fds free");
	tu_fds_free(&before);
}
END_TEST

/* ------------------------------------------------------------ sync and warnings */

START_TEST(run_sync_echo)
{
	static const char *const argv[] = { "/bin/echo", "hi", NULL };
	sbx_run_options o = opts(argv, NULL);
	sbx_sandbox_options so;
	sbx_result *r = NULL;
	sbx_error err;
	int rc;

	sbx_sandbox_options_init(&so);
	so.backend = SBX_BACKEND_PASSTHROUGH;
	memset(&err, 0, sizeof(err));
	rc = sbx_run_sync(NULL, &so, &o, &r, &err);
	ck_assert_msg(rc == 0, "sbx_run_sync: %d %s", rc, err.message);
	ck_assert_ptr_nonnull(r);
	assert_exited(r, 0);
	assert_stream(r, SBX_STDOUT, "hi\n");
	ck_assert_str_eq(r->backend, "passthrough");
	sbx_result_free(r);

	/* A program that cannot start is a result, not a failure. */
	{
		static const char *const missing[] = { "/nonexistent/sbx-sync", NULL };

		o = opts(missing, NULL);
		r = NULL;
		ck_assert_int_eq(sbx_run_sync(NULL, &so, &o, &r, NULL), 0);
		ck_assert_ptr_nonnull(r);
		ck_assert_ptr_nonnull(r->error);
		ck_assert_int_eq(r->start_errno, ENOENT);
		sbx_result_free(r);
	}
	/* Options that describe no run are refused. */
	o = opts(NULL, NULL);
	r = NULL;
	memset(&err, 0, sizeof(err));
	rc = sbx_run_sync(NULL, &so, &o, &r, &err);
	ck_assert_int_lt(rc, 0);
	ck_assert_int_eq(err.code, rc);
	ck_assert_ptr_null(r);
}
END_TEST

/* Runs /bin/true under |p| (freed here) on a sandbox of its own. */
static sbx_result *run_true_with(sbx_policy *p, tu_call *c)
{
	static const char *const argv[] = { "/bin/true", NULL };
	sbx_run_options o = opts(argv, NULL);
	sbx_result *r = tu_run(tu_sandbox(p, 0), &o, c);

	tu_sandbox_free();
	sbx_policy_free(p);
	/* The result outlives its sandbox. */
	assert_exited(r, 0);
	ck_assert(!r->isolated);
	ck_assert_str_eq(r->backend, "passthrough");
	ck_assert_uint_le(r->resources.nwarnings, SBX_MAX_WARNINGS);
	for (unsigned i = 0; i < r->resources.nwarnings; i++)
		ck_assert_msg(r->resources.warnings[i] != NULL && r->resources.warnings[i][0] != '\0',
		              "warning %u is empty", i);
	return r;
}

/* How many warnings a passthrough run of an empty policy carries. */
static unsigned baseline_warnings(void)
{
	sbx_policy *p = sbx_policy_new();
	unsigned n;
	tu_call c;

	ck_assert_ptr_nonnull(p);
	n = run_true_with(p, &c)->resources.nwarnings;
	for (int l = 0; l < SBX_LIMIT_COUNT; l++)
		if (l != SBX_LIMIT_CORE_DUMPS)
			ck_assert_int_eq(c.result->resources.mechanisms[l], SBX_MECH_UNSET);
	tu_call_done(&c);
	return n;
}

static bool some_warning_mentions(const sbx_result *r, const char *word)
{
	for (unsigned i = 0; i < r->resources.nwarnings; i++)
		if (strcasestr(r->resources.warnings[i], word) != NULL)
			return true;
	return false;
}

/* The passthrough backend enforces no limit: each one asked for is a
 * warning and a mechanism of "none"; one not asked for stays unset. */
START_TEST(passthrough_warns_about_limits)
{
	/* A limit the policy asks to leave unenforced (memory strategy none) is
	 * a warning naming it; one enforced per process only (cpu seconds) is an
	 * rlimit with a warning saying so.  How the others are enforced depends
	 * on the machine: tests/check_limits.c holds each to what it reports. */
	unsigned base = baseline_warnings();
	sbx_policy *p = sbx_policy_new();
	sbx_result *r;
	tu_call c;

	ck_assert_ptr_nonnull(p);
	ck_assert_int_eq(sbx_policy_set_memory(p, 64 * MIB, NULL), 0);
	ck_assert_int_eq(sbx_policy_set_memory_strategy(p, SBX_MEMORY_NONE, NULL), 0);
	ck_assert_int_eq(sbx_policy_set_cpu_seconds(p, 5, NULL), 0);
	r = run_true_with(p, &c);
	ck_assert_msg(r->resources.nwarnings >= base + 2,
	              "the limits add no warnings (%u, %u without them)", r->resources.nwarnings,
	              base);
	ck_assert_int_eq(r->resources.mechanisms[SBX_LIMIT_MEMORY], SBX_MECH_NONE);
	ck_assert_msg(some_warning_mentions(r, "memory"), "no warning names the memory limit");
	ck_assert_int_eq(r->resources.mechanisms[SBX_LIMIT_CPU_SECONDS], SBX_MECH_RLIMIT);
	ck_assert_msg(some_warning_mentions(r, "cpu_seconds"), "no warning names cpu_seconds");
	ck_assert_int_ne(r->resources.mechanisms[SBX_LIMIT_CORE_DUMPS], SBX_MECH_UNSET);
	ck_assert_int_eq(r->resources.mechanisms[SBX_LIMIT_CPUS], SBX_MECH_UNSET);
	ck_assert_uint_eq(r->resources.limits_hit, 0);
	tu_call_done(&c);
}
END_TEST

START_TEST(passthrough_warns_about_writable_paths)
{
	unsigned base = baseline_warnings();
	sbx_policy *p = sbx_policy_new();
	sbx_result *r;
	tu_call c;

	ck_assert_ptr_nonnull(p);
	ck_assert_int_eq(sbx_policy_add_writable(p, tu_tmpdir(), NULL), 0);
	r = run_true_with(p, &c);
	ck_assert_msg(r->resources.nwarnings > base,
	              "a writable path adds no warning (%u, %u without it)", r->resources.nwarnings,
	              base);
	ck_assert_int_eq(r->resources.mechanisms[SBX_LIMIT_MEMORY], SBX_MECH_UNSET);
	ck_assert_int_ne(r->resources.mechanisms[SBX_LIMIT_CORE_DUMPS], SBX_MECH_UNSET);
	tu_call_done(&c);
}
END_TEST


/* ------------------------------------------------------- living with the loop */

/* When every run has called back, the sandbox holds nothing on the loop:
 * event_base_dispatch() returns by itself, as a caller that runs its loop
 * "until done" needs. */
START_TEST(dispatch_returns_when_runs_done)
{
	static const char *const argv[] = { "/bin/echo", "x", NULL };
	sbx_run_options o = opts(argv, NULL);
	sbx_sandbox *sb = tu_sandbox(NULL, 2);
	tu_call c[5];

	start_all(sb, &o, c, 5);
	ck_assert_int_ge(event_base_dispatch(tu_base), 0);
	for (int i = 0; i < 5; i++) {
		ck_assert_msg(c[i].calls == 1, "run %d called back %d times", i, c[i].calls);
		assert_exited(c[i].result, 0);
	}
	ck_assert_int_eq(event_base_get_num_events(tu_base, EVENT_BASE_COUNT_ADDED |
	                                                        EVENT_BASE_COUNT_ACTIVE),
	                 0);
	done_all(c, 5);
}
END_TEST

/* A run's callback may free the sandbox; the run still in flight then calls
 * back once, cancelled, from inside that free. */
struct free_in_cb {
	tu_call first, other;
	bool freed;
};

static void free_in_cb_first(sbx_result *r, void *arg)
{
	struct free_in_cb *f = arg;

	tu_call_cb(r, &f->first);
	ck_assert_msg(f->other.calls == 0, "the other run ended before the sandbox was freed");
	tu_sandbox_free();
	f->freed = true;
	ck_assert_msg(f->other.calls == 1, "the other run did not call back inside the free");
}

START_TEST(callback_may_free_the_sandbox)
{
	static const char *const quick[] = { "/bin/true", NULL };
	char token[32];
	const char *slow[] = { "/bin/sleep", token, NULL };
	sbx_run_options o = opts(slow, NULL);
	sbx_sandbox *sb = tu_sandbox(NULL, 0);
	struct free_in_cb f;
	sbx_error err;

	memset(&f, 0, sizeof(f));
	memset(&err, 0, sizeof(err));
	tu_token(token, sizeof(token), "30");
	tu_start(sb, &o, &f.other);
	o = opts(quick, NULL);
	ck_assert_int_eq(sbx_run_start(sb, &o, free_in_cb_first, &f, NULL, &err), 0);
	while (!f.freed)
		ck_assert_int_eq(event_base_loop(tu_base, EVLOOP_ONCE), 0);
	tu_spin_loop(5);
	ck_assert_int_eq(f.first.calls, 1);
	ck_assert_int_eq(f.other.calls, 1);
	assert_exited(f.first.result, 0);
	ck_assert(f.other.result->cancelled);
	ck_assert_msg(tu_find_proc(token) == 0, "the other run's sleep survived");
	tu_call_done(&f.first);
	tu_call_done(&f.other);
}
END_TEST

/* Runs may be started from a run's callback. */
struct chain {
	sbx_sandbox *sb;
	int done;
	char out[5][64];
};

static void start_link(struct chain *ch);

static void chain_cb(sbx_result *r, void *arg)
{
	struct chain *ch = arg;

	ck_assert_msg(r->exited && r->exit_code == 0, "link %d failed", ch->done);
	snprintf(ch->out[ch->done], sizeof(ch->out[0]), "%s", r->out[SBX_STDOUT].data);
	sbx_result_free(r);
	if (++ch->done < 5)
		start_link(ch);
}

static void start_link(struct chain *ch)
{
	char cmd[32];
	sbx_run_options o;
	sbx_error err;

	snprintf(cmd, sizeof(cmd), "echo link%d", ch->done);
	o = opts(NULL, cmd);
	memset(&err, 0, sizeof(err));
	ck_assert_msg(sbx_run_start(ch->sb, &o, chain_cb, ch, NULL, &err) == 0, "%s", err.message);
}

START_TEST(runs_started_from_callbacks)
{
	struct chain ch;

	memset(&ch, 0, sizeof(ch));
	ch.sb = tu_sandbox(NULL, 0);
	start_link(&ch);
	while (ch.done < 5)
		ck_assert_int_eq(event_base_loop(tu_base, EVLOOP_ONCE), 0);
	for (int i = 0; i < 5; i++) {
		char want[32];

		snprintf(want, sizeof(want), "link%d\n", i);
		ck_assert_str_eq(ch.out[i], want);
	}
}
END_TEST

/* Freeing the sandbox before the loop ever ran: started and queued runs
 * alike call back once, cancelled, and nothing is left running. */
START_TEST(sandbox_free_before_dispatch)
{
	char token[32];
	const char *argv[] = { "/bin/sleep", token, NULL };
	sbx_run_options o = opts(argv, NULL);
	sbx_sandbox *sb;
	tu_call c[5];

	tu_token(token, sizeof(token), "30");
	sb = tu_sandbox(NULL, 2);
	start_all(sb, &o, c, 5);
	tu_sandbox_free();
	for (int i = 0; i < 5; i++) {
		ck_assert_msg(c[i].calls == 1, "run %d called back %d times", i, c[i].calls);
		ck_assert(c[i].result->cancelled);
		ck_assert(!c[i].result->exited);
	}
	ck_assert_msg(tu_find_proc(token) == 0, "a sleep survived the free");
	tu_spin_loop(5);
	for (int i = 0; i < 5; i++)
		ck_assert_int_eq(c[i].calls, 1);
	done_all(c, 5);
}
END_TEST

/* Without PATH in the caller's environment, runs still get one. */
START_TEST(path_default_when_caller_has_none)
{
	static const char *const argv[] = { "sh", "-c", "echo \"$PATH\"", NULL };
	sbx_run_options o = opts(argv, NULL);
	sbx_result *r;
	tu_call c;

	ck_assert_int_eq(unsetenv("PATH"), 0);
	r = tu_run(tu_sandbox(NULL, 0), &o, &c);
	assert_exited(r, 0);
	ck_assert_msg(tu_contains(r->out[SBX_STDOUT].data, "/bin"), "PATH is \"%s\"",
	              r->out[SBX_STDOUT].data);
	tu_call_done(&c);
}
END_TEST

/* ------------------------------------------------------------ more faults */

/*
 * A run that waited in the queue and then cannot get its fds is a start
 * error in its result: callback once, no exit code, start_errno EMFILE.
 */
START_TEST(emfile_in_queue_is_a_start_error)
{
	static const char *const argv[] = { "/bin/sleep", "0.3", NULL };
	sbx_run_options o = opts(argv, NULL);
	sbx_sandbox *sb = tu_sandbox(NULL, 1);
	struct rlimit saved;
	tu_fds before, now;
	tu_call first, queued;

	tu_fds_snapshot(&before);
	tu_start(sb, &o, &first);
	tu_start(sb, &o, &queued);
	ck_assert_int_eq(getrlimit(RLIMIT_NOFILE, &saved), 0);
	limit_free_fds(0);
	event_base_loop(tu_base, EVLOOP_ONCE | EVLOOP_NONBLOCK);
	ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &saved), 0);
	tu_wait(&queued);
	tu_wait(&first);
	assert_exited(first.result, 0);
	ck_assert_msg(queued.result->error != NULL, "the queued run did not report its failure");
	ck_assert(!queued.result->exited);
	ck_assert_int_eq(queued.result->exit_code, -1);
	ck_assert_msg(queued.result->start_errno == EMFILE, "start_errno %d, error \"%s\"",
	              queued.result->start_errno, queued.result->error);
	tu_call_done(&first);
	tu_call_done(&queued);
	tu_fds_snapshot(&now);
	tu_fds_assert_same(&before, &now, "after the queued run failed");
	tu_fds_free(&before);
	tu_fds_free(&now);
}
END_TEST

/* Signals arriving all the time (SIGALRM every 500 us, without SA_RESTART):
 * every interrupted call is retried and every run comes out right. */
static volatile sig_atomic_t alarms;

static void on_alarm(int sig)
{
	alarms++;
}

static void alarm_storm(long usec)
{
	struct itimerval it;

	memset(&it, 0, sizeof(it));
	it.it_interval.tv_usec = usec;
	it.it_value.tv_usec = usec;
	ck_assert_int_eq(setitimer(ITIMER_REAL, &it, NULL), 0);
}

START_TEST(eintr_storm)
{
	static const char *const cat[] = { "/bin/cat", NULL };
	static const char *const missing[] = { "/nonexistent/sbx-eintr", NULL };
	static const char *const sleeper[] = { "/bin/sleep", "5", NULL };
	size_t len = 4 * MIB;
	unsigned char *data = malloc(len);
	sbx_sandbox *sb = tu_sandbox(NULL, 0);
	struct sigaction sa;
	sbx_run_options o;
	tu_call c[4];

	ck_assert_ptr_nonnull(data);
	fill_bytes(data, len);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_alarm;
	sa.sa_flags = 0; /* no SA_RESTART: calls fail with EINTR */
	ck_assert_int_eq(sigaction(SIGALRM, &sa, NULL), 0);
	/* Under valgrind an interrupted epoll_wait() starts its timeout over, so
	 * signals faster than the library's timers would stop the clock. */
	alarm_storm(tu_under_valgrind() ? 20000 : 500);

	o = opts(cat, NULL);
	o.stdin_data = data;
	o.stdin_len = len;
	o.max_output = 5 * MIB;
	tu_start(sb, &o, &c[0]);
	o = opts(missing, NULL);
	tu_start(sb, &o, &c[1]);
	o = opts(sleeper, NULL);
	o.timeout = 0.5;
	tu_start(sb, &o, &c[2]);
	o = opts(NULL, "echo storm; echo err >&2");
	tu_start(sb, &o, &c[3]);
	wait_all(c, 4);
	alarm_storm(0);

	ck_assert_msg(alarms > (tu_under_valgrind() ? 10 : 100), "only %d signals arrived",
	              (int)alarms);
	assert_exited(c[0].result, 0);
	ck_assert_uint_eq(c[0].result->out[SBX_STDOUT].len, len);
	ck_assert_msg(memcmp(c[0].result->out[SBX_STDOUT].data, data, len) == 0,
	              "stdin came back changed");
	ck_assert_int_eq(c[1].result->start_errno, ENOENT);
	ck_assert(!c[1].result->exited);
	ck_assert(c[2].result->timed_out);
	assert_exited(c[3].result, 0);
	assert_stream(c[3].result, SBX_STDOUT, "storm\n");
	assert_stream(c[3].result, SBX_STDERR, "err\n");
	done_all(c, 4);
	free(data);
}
END_TEST

/* The supervisor is SIGKILLed mid-run: its direct child is gone within a
 * second (the parent-death signal; with no PID namespace that is all a
 * passthrough run can promise). */
START_TEST(supervisor_killed_child_dies)
{
	char token[32];
	char *const argv[] = { (char *)tu_self(), "--helper", "supervise", token, NULL };
	pid_t sup;
	int st;

	tu_token(token, sizeof(token), "31");
	sup = fork();
	ck_assert_int_ge(sup, 0);
	if (sup == 0) {
		execv(tu_self(), argv);
		_exit(127);
	}
	for (double t0 = tu_now(); tu_find_proc(token) == 0;) {
		ck_assert_msg(tu_now() - t0 < 10, "the supervised sleep never appeared");
		ck_assert_msg(waitpid(sup, &st, WNOHANG) == 0, "the supervisor died early");
		usleep(10000);
	}
	ck_assert_int_eq(kill(sup, SIGKILL), 0);
	ck_assert_int_eq(waitpid(sup, &st, 0), sup);
	ck_assert(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
	ck_assert_msg(tu_wait_gone(token, 1.0), "the run outlived its supervisor by a second");
}
END_TEST

/* ---------------------------------------------------------------- the suite */

static Suite *run_suite(void)
{
	Suite *s = suite_create("run");
	TCase *tc;

	tc = tu_tcase("result", TU_TIMEOUT);
	tcase_add_test(tc, run_reports_both_streams_and_exit_code);
	tcase_add_loop_test(tc, run_exit_codes, 0, sizeof(exit_codes) / sizeof(exit_codes[0]));
	tcase_add_test(tc, run_signal_is_not_an_exit_code);
	tcase_add_loop_test(tc, run_cannot_start, 0, CANNOT_COUNT);
	tcase_add_loop_test(tc, run_bad_options_refused, 0, BAD_COUNT);
	suite_add_tcase(s, tc);

	tc = tu_tcase("child", TU_TIMEOUT);
	tcase_add_test(tc, run_argv_passed_intact);
	tcase_add_test(tc, run_bare_name_found_on_path);
	tcase_add_test(tc, run_shell_string_through_sh);
	tcase_add_test(tc, run_cwd_honoured);
	tcase_add_test(tc, run_cwd_missing_is_not_an_exit_code);
	tcase_add_test(tc, run_environment_built_not_inherited);
	tcase_add_test(tc, run_child_gets_only_std_fds);
	tcase_add_test(tc, run_child_in_own_session);
	tcase_add_test(tc, run_child_signal_state_reset);
	suite_add_tcase(s, tc);

	tc = tu_tcase("stdin", TU_TIMEOUT);
	tcase_add_test(tc, stdin_bytes_delivered);
	tcase_add_test(tc, stdin_empty_is_eof);
	tcase_add_test(tc, stdin_4mib_round_trips);
	tcase_add_test(tc, stdin_unread_is_no_error);
	tcase_add_test(tc, stdin_closed_early_no_sigpipe);
	tcase_add_test(tc, stdin_null_is_dev_null);
	suite_add_tcase(s, tc);

	tc = tu_tcase("endings", TU_TIMEOUT);
	tcase_add_test(tc, timeout_kills);
	tcase_add_test(tc, timeout_kills_a_sigterm_ignorer);
	tcase_add_test(tc, timeout_kills_detached_descendants);
	tcase_add_test(tc, timeout_zero_is_none);
	tcase_add_loop_test(tc, background_child_cannot_hold_the_run, 0,
	                    sizeof(background_cmds) / sizeof(background_cmds[0]));
	tcase_add_test(tc, detached_grandchild_cannot_hold_the_run);
	tcase_add_test(tc, closed_stdout_does_not_end_the_run);
	tcase_add_test(tc, cancel_kills_once);
	tcase_add_test(tc, cancel_before_loop_and_in_queue);
	tcase_add_test(tc, cancel_while_draining_keeps_the_exit);
	tcase_add_test(tc, sandbox_free_with_runs_in_flight);
	suite_add_tcase(s, tc);

	tc = tu_tcase("output", TU_TIMEOUT);
	tcase_add_test(tc, output_cap_endless_output);
	tcase_add_test(tc, output_cap_each_stream);
	tcase_add_loop_test(tc, output_cap_boundary, 0, sizeof(cap_boundary) / sizeof(cap_boundary[0]));
	tcase_add_test(tc, output_large_both_streams_kept);
	tcase_add_test(tc, on_output_sees_every_byte);
	tcase_add_test(tc, on_output_may_cancel);
	suite_add_tcase(s, tc);

	tc = tu_tcase("load", 4 * TU_TIMEOUT);
	tcase_add_test(tc, thousand_concurrent_runs);
	tcase_add_test(tc, queue_max_starting_one);
	tcase_add_test(tc, abusive_runs_do_not_starve_the_loop);
	suite_add_tcase(s, tc);

	tc = tu_tcase("host", TU_TIMEOUT);
	tcase_add_test(tc, host_child_not_reaped);
	tcase_add_test(tc, emfile_on_start_leaves_nothing);
	suite_add_tcase(s, tc);

	tc = tu_tcase("loop", TU_TIMEOUT);
	tcase_add_test(tc, dispatch_returns_when_runs_done);
	tcase_add_test(tc, callback_may_free_the_sandbox);
	tcase_add_test(tc, runs_started_from_callbacks);
	tcase_add_test(tc, sandbox_free_before_dispatch);
	tcase_add_test(tc, path_default_when_caller_has_none);
	suite_add_tcase(s, tc);

	tc = tu_tcase("faults", TU_TIMEOUT);
	tcase_add_test(tc, emfile_in_queue_is_a_start_error);
	tcase_add_test(tc, eintr_storm);
	tcase_add_test(tc, supervisor_killed_child_dies);
	suite_add_tcase(s, tc);

	tc = tu_tcase("api", TU_TIMEOUT);
	tcase_add_test(tc, run_sync_echo);
	tcase_add_test(tc, passthrough_warns_about_limits);
	tcase_add_test(tc, passthrough_warns_about_writable_paths);
	suite_add_tcase(s, tc);
	return s;
}

int main(int argc, char **argv)
{
	tu_init(argc, argv);
	return tu_run_suite(run_suite());
}
