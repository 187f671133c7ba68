/*
 * check_cli.c -- the sbx program seen from outside.  Each test runs the built
 * binary with its stdout and stderr on pipes, then checks what it printed,
 * its JSON result and its exit status against DESIGN.md.
 *
 * Tests that must show that no process survives a run give the command a
 * unique argument (a sleep of "30.<pid>" seconds) and afterwards look for
 * that argument in every /proc/PID/cmdline.
 */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define SBX_PATH SBX_TOP_BUILDDIR "/src/sbx"

/* The replacement character U+FFFD in UTF-8. */
#define FFFD "\xEF\xBF\xBD"

/* How a test wants sbx's standard streams set up. */
enum {
	SPAWN_CLOSE_STDOUT = 1, /* nobody reads sbx's stdout: writes get EPIPE */
	SPAWN_OPEN_STDIN = 2,   /* stdin is a pipe kept open, never written */
};

/* A started sbx. */
struct proc {
	pid_t pid;
	int out_fd, err_fd, in_fd;
	double started;
};

/* What a finished sbx printed and how it ended. */
struct outcome {
	char *out, *err;   /* NUL-terminated, may hold NUL bytes */
	size_t out_len, err_len;
	int status;        /* exit status, or -1 when a signal ended sbx */
	int signal;        /* that signal, or 0 */
	double seconds;    /* from start to exit */
};

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void start_sbx(struct proc *p, const char *const *argv, int flags)
{
	int out[2], err[2], in[2];

	ck_assert_int_eq(pipe2(out, O_CLOEXEC), 0);
	ck_assert_int_eq(pipe2(err, O_CLOEXEC), 0);
	ck_assert_int_eq(pipe2(in, O_CLOEXEC), 0);
	p->started = now();
	p->pid = fork();
	ck_assert_int_ge(p->pid, 0);
	if (p->pid == 0) {
		int null = open("/dev/null", O_RDONLY);

		dup2(flags & SPAWN_OPEN_STDIN ? in[0] : null, STDIN_FILENO);
		dup2(out[1], STDOUT_FILENO);
		dup2(err[1], STDERR_FILENO);
		execv(argv[0], (char *const *)argv);
		dprintf(STDERR_FILENO, "cannot run %s: %s\n", argv[0], strerror(errno));
		_exit(99);
	}
	close(out[1]);
	close(err[1]);
	close(in[0]);
	p->out_fd = out[0];
	p->err_fd = err[0];
	p->in_fd = in[1];
	if (flags & SPAWN_CLOSE_STDOUT) {
		close(p->out_fd);
		p->out_fd = -1;
	}
}

static void append(char **buf, size_t *len, const char *data, size_t n)
{
	*buf = realloc(*buf, *len + n + 1);
	ck_assert_ptr_nonnull(*buf);
	memcpy(*buf + *len, data, n);
	*len += n;
	(*buf)[*len] = '\0';
}

/* Reads both streams to their end, then reaps sbx. */
static void finish_sbx(struct proc *p, struct outcome *o)
{
	struct pollfd pfd[2] = {{.fd = p->out_fd, .events = POLLIN},
	                        {.fd = p->err_fd, .events = POLLIN}};
	char chunk[65536];
	ssize_t n;
	int ws, i;

	memset(o, 0, sizeof(*o));
	append(&o->out, &o->out_len, "", 0);
	append(&o->err, &o->err_len, "", 0);
	while (pfd[0].fd >= 0 || pfd[1].fd >= 0) {
		if (poll(pfd, 2, -1) < 0) {
			ck_assert_int_eq(errno, EINTR);
			continue;
		}
		for (i = 0; i < 2; i++) {
			if (pfd[i].fd < 0 || !pfd[i].revents)
				continue;
			n = read(pfd[i].fd, chunk, sizeof(chunk));
			if (n > 0) {
				if (i == 0)
					append(&o->out, &o->out_len, chunk, (size_t)n);
				else
					append(&o->err, &o->err_len, chunk, (size_t)n);
			} else if (n == 0 || errno != EINTR) {
				close(pfd[i].fd);
				pfd[i].fd = -1;
			}
		}
	}
	ck_assert_int_eq(waitpid(p->pid, &ws, 0), p->pid);
	o->seconds = now() - p->started;
	o->status = WIFEXITED(ws) ? WEXITSTATUS(ws) : -1;
	o->signal = WIFSIGNALED(ws) ? WTERMSIG(ws) : 0;
	close(p->in_fd);
}

static void run_argv(struct outcome *o, const char *const *argv, int flags)
{
	struct proc p;

	start_sbx(&p, argv, flags);
	finish_sbx(&p, o);
	ck_assert_msg(o->status != 99, "%s", o->err);
}

static void outcome_free(struct outcome *o)
{
	free(o->out);
	free(o->err);
}

/* sbx(&o, "run", "--", "true") runs the built sbx with those arguments. */
#define sbx(o, ...) run_argv((o), (const char *const[]){SBX_PATH, __VA_ARGS__, NULL}, 0)

/* ------------------------------------------------------------ JSON helpers */

static json_t *parse_json(const struct outcome *o)
{
	json_error_t jerr;
	json_t *j;

	j = json_loadb(o->out, o->out_len, JSON_ALLOW_NUL, &jerr);
	ck_assert_msg(j != NULL, "stdout is not JSON (%s): %s; stderr: %s", jerr.text, o->out,
	              o->err);
	ck_assert(json_is_object(j));
	return j;
}

static json_t *key(json_t *obj, const char *name)
{
	json_t *v = json_object_get(obj, name);

	ck_assert_msg(v != NULL, "key \"%s\" is missing", name);
	return v;
}

static void assert_int(json_t *obj, const char *name, json_int_t want)
{
	json_t *v = key(obj, name);

	ck_assert_msg(json_is_integer(v), "\"%s\" is not an integer", name);
	ck_assert_int_eq(json_integer_value(v), want);
}

static void assert_null(json_t *obj, const char *name)
{
	ck_assert_msg(json_is_null(key(obj, name)), "\"%s\" is not null", name);
}

static void assert_bool(json_t *obj, const char *name, bool want)
{
	json_t *v = key(obj, name);

	ck_assert_msg(json_is_boolean(v), "\"%s\" is not a boolean", name);
	ck_assert_msg(json_is_true(v) == want, "\"%s\" is not %s", name,
	              want ? "true" : "false");
}

static const char *str_of(json_t *obj, const char *name)
{
	json_t *v = key(obj, name);

	ck_assert_msg(json_is_string(v), "\"%s\" is not a string", name);
	return json_string_value(v);
}

static void assert_str(json_t *obj, const char *name, const char *want)
{
	ck_assert_str_eq(str_of(obj, name), want);
}

static bool array_has(json_t *arr, const char *word)
{
	size_t i;
	json_t *v;

	json_array_foreach(arr, i, v) {
		if (json_is_string(v) && strcmp(json_string_value(v), word) == 0)
			return true;
	}
	return false;
}

static bool is_mechanism(const char *name)
{
	static const char *const names[] = {"cgroup_v2", "cgroup_v1", "rlimit", "watchdog",
	                                    "none", NULL};
	int i;

	for (i = 0; names[i]; i++) {
		if (strcmp(name, names[i]) == 0)
			return true;
	}
	return false;
}

/* Every line of |err| is a warning of sbx's; nothing else was said. */
static void assert_only_warnings(const char *err)
{
	const char *line;

	for (line = err; *line; line = strchr(line, '\n') + 1) {
		ck_assert_msg(strncmp(line, "sbx: warning: ", 14) == 0 && strchr(line, '\n'),
		              "stderr: %s", err);
	}
}

/* ---------------------------------------------------- processes and files */

/* A process other than |except| (and us) with |arg| as one of its arguments, or 0. */
/* A process other than |except| with |arg| among its arguments and, when
 * |prog| is not NULL, a program of that base name; its pid, or 0. */
static pid_t find_process(const char *arg, const char *prog, pid_t except)
{
	char path[64], buf[8192];
	struct dirent *e;
	pid_t pid, found = 0;
	ssize_t n;
	char *s;
	DIR *d;
	int fd;

	d = opendir("/proc");
	ck_assert_ptr_nonnull(d);
	while (!found && (e = readdir(d)) != NULL) {
		pid = (pid_t)atoi(e->d_name);
		if (pid <= 0 || pid == except || pid == getpid())
			continue;
		snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)pid);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		/* A zombie has an empty command line, so only live processes match. */
		n = read(fd, buf, sizeof(buf) - 1);
		close(fd);
		if (n <= 0)
			continue;
		buf[n] = '\0';
		if (prog) {
			const char *base = strrchr(buf, '/') ? strrchr(buf, '/') + 1 : buf;
			if (strcmp(base, prog) != 0)
				continue;
		}
		for (s = buf; s < buf + n; s += strlen(s) + 1) {
			if (strcmp(s, arg) == 0)
				found = pid;
		}
	}
	closedir(d);
	return found;
}

/*
 * Killing a tree with SIGKILL returns before the processes are gone, so a
 * survivor is one still there after a short grace period.
 */
static void assert_no_process_with_arg(const char *arg)
{
	double deadline = now() + 1.0;
	pid_t pid;

	while ((pid = find_process(arg, NULL, 0)) != 0 && now() < deadline)
		usleep(10000);
	ck_assert_msg(pid == 0, "process %d with argument %s survived the run", (int)pid, arg);
}

/* Waits until a process other than |except| runs `sleep |arg|`; returns its pid. */
static pid_t wait_for_sleep(const char *arg, pid_t except)
{
	double deadline = now() + 5.0;
	char path[64], comm[32];
	pid_t pid;
	ssize_t n;
	int fd;

	while (now() < deadline) {
		pid = find_process(arg, "sleep", except);
		snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
		fd = pid ? open(path, O_RDONLY | O_CLOEXEC) : -1;
		if (fd >= 0) {
			n = read(fd, comm, sizeof(comm) - 1);
			close(fd);
			if (n == 6 && memcmp(comm, "sleep\n", 6) == 0)
				return pid;
		}
		usleep(10000);
	}
	ck_abort_msg("sleep %s never started", arg);
	return 0;
}

static char tmpdir_path[] = "/tmp/sbx-check-cli-XXXXXX";

/* Runs when the test's process exits, whether the test passed or not. */
static void remove_tmpdir(void)
{
	char cmd[sizeof tmpdir_path + 32];

	snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir_path);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", tmpdir_path);
}

/* A fresh directory for one test, removed when its process exits. */
static char *make_tmpdir(void)
{
	ck_assert_ptr_nonnull(mkdtemp(tmpdir_path));
	atexit(remove_tmpdir);
	return tmpdir_path;
}

static void write_file(const char *path, const char *data, size_t len, mode_t mode)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, data, len), (ssize_t)len);
	close(fd);
}

/* --------------------------------------------------------- result object */

START_TEST(json_result_has_every_key)
{
	struct outcome o;
	json_t *j, *res, *v;
	const char *name;

	sbx(&o, "run", "--json", "--backend", "passthrough", "--", "sh", "-c",
	    "echo out; echo err >&2; exit 3");
	ck_assert_int_eq(o.status, 3);
	ck_assert_msg(o.err_len == 0, "sbx printed on stderr with --json: %s", o.err);
	j = parse_json(&o);
	ck_assert_uint_eq(json_object_size(j), 13);
	assert_int(j, "exit_code", 3);
	assert_null(j, "signal");
	assert_bool(j, "timed_out", false);
	assert_str(j, "stdout", "out\n");
	assert_str(j, "stderr", "err\n");
	assert_int(j, "stdout_bytes", 4);
	assert_int(j, "stderr_bytes", 4);
	assert_bool(j, "stdout_truncated", false);
	assert_bool(j, "stderr_truncated", false);
	assert_bool(j, "isolated", false);
	assert_str(j, "backend", "passthrough");
	assert_null(j, "error");

	res = key(j, "resources");
	ck_assert(json_is_object(res));
	ck_assert_uint_eq(json_object_size(res), 8);
	ck_assert(json_is_real(key(res, "wall_seconds")));
	ck_assert(json_real_value(key(res, "wall_seconds")) >= 0);
	ck_assert(json_real_value(key(res, "wall_seconds")) < 10);
	ck_assert(json_is_real(key(res, "cpu_user_seconds")));
	ck_assert(json_real_value(key(res, "cpu_user_seconds")) >= 0);
	ck_assert(json_is_real(key(res, "cpu_system_seconds")));
	ck_assert(json_real_value(key(res, "cpu_system_seconds")) >= 0);
	v = key(res, "peak_memory_bytes");
	ck_assert(json_is_null(v) || (json_is_integer(v) && json_integer_value(v) > 0));
	/* A peak comes with its source, and no source without a peak. */
	ck_assert_int_eq(json_is_null(v), json_is_null(key(res, "peak_memory_source")));
	ck_assert(json_is_null(v) || json_is_string(key(res, "peak_memory_source")));
	ck_assert(json_is_object(key(res, "mechanisms")));
	json_object_foreach(key(res, "mechanisms"), name, v) {
		ck_assert_msg(json_is_string(v) && is_mechanism(json_string_value(v)),
		              "mechanism of %s is not a known name", name);
	}
	ck_assert(json_is_array(key(res, "limits_hit")));
	ck_assert_uint_eq(json_array_size(key(res, "limits_hit")), 0);
	ck_assert(json_is_array(key(res, "warnings")));
	json_decref(j);
	outcome_free(&o);
}
END_TEST

START_TEST(plain_output_streams_through)
{
	struct outcome o;

	sbx(&o, "run", "--", "sh", "-c", "echo out; echo err >&2; exit 3");
	ck_assert_int_eq(o.status, 3);
	ck_assert_str_eq(o.out, "out\n");
	ck_assert_ptr_nonnull(strstr(o.err, "err\n"));
	outcome_free(&o);
}
END_TEST

START_TEST(auto_backend_is_named)
{
	struct outcome o;
	json_t *j;

	sbx(&o, "run", "--json", "--", "true");
	ck_assert_int_eq(o.status, 0);
	j = parse_json(&o);
	ck_assert_str_ne(str_of(j, "backend"), "");
	ck_assert(json_is_boolean(key(j, "isolated")));
	assert_int(j, "exit_code", 0);
	json_decref(j);
	outcome_free(&o);
}
END_TEST

START_TEST(mechanisms_name_the_limits_asked_for)
{
	struct outcome o;
	json_t *j, *mech;

	sbx(&o, "run", "--json", "--backend", "passthrough", "--memory", "256M", "--processes",
	    "1000", "--open-files", "256", "--", "true");
	ck_assert_int_eq(o.status, 0);
	j = parse_json(&o);
	mech = key(key(j, "resources"), "mechanisms");
	ck_assert(is_mechanism(str_of(mech, "memory")));
	ck_assert(is_mechanism(str_of(mech, "processes")));
	ck_assert(is_mechanism(str_of(mech, "open_files")));
	ck_assert_ptr_null(json_object_get(mech, "cpus"));
	ck_assert_ptr_null(json_object_get(mech, "cpu_seconds"));
	ck_assert_ptr_null(json_object_get(mech, "file_size"));
	json_decref(j);
	outcome_free(&o);
}
END_TEST

/* Without --json the warnings of the result are sbx's only words on stderr. */
START_TEST(warnings_go_to_stderr_without_json)
{
	struct outcome o;
	json_t *j, *w;
	char *want = NULL;
	size_t want_len = 0, i;
	const char *prefix = "sbx: warning: ";

	sbx(&o, "run", "--json", "--backend", "passthrough", "--cpus", "0.5", "--", "true");
	ck_assert_int_eq(o.status, 0);
	j = parse_json(&o);
	append(&want, &want_len, "", 0);
	json_array_foreach(key(key(j, "resources"), "warnings"), i, w) {
		ck_assert(json_is_string(w));
		append(&want, &want_len, prefix, strlen(prefix));
		append(&want, &want_len, json_string_value(w), json_string_length(w));
		append(&want, &want_len, "\n", 1);
	}
	json_decref(j);
	outcome_free(&o);

	sbx(&o, "run", "--backend", "passthrough", "--cpus", "0.5", "--", "true");
	ck_assert_int_eq(o.status, 0);
	ck_assert_str_eq(o.err, want);
	free(want);
	outcome_free(&o);
}
END_TEST

/* ----------------------------------------------------------- exit statuses */

START_TEST(exit_code_is_the_commands)
{
	struct outcome o;

	sbx(&o, "run", "--", "true");
	ck_assert_int_eq(o.status, 0);
	outcome_free(&o);
	sbx(&o, "run", "-c", "exit 255");
	ck_assert_int_eq(o.status, 255);
	outcome_free(&o);
}
END_TEST

START_TEST(signal_is_128_plus_n)
{
	struct outcome o;
	json_t *j;

	sbx(&o, "run", "-c", "kill -TERM $$");
	ck_assert_int_eq(o.status, 128 + SIGTERM);
	outcome_free(&o);

	sbx(&o, "run", "--json", "-c", "kill -TERM $$");
	ck_assert_int_eq(o.status, 128 + SIGTERM);
	j = parse_json(&o);
	assert_int(j, "signal", SIGTERM);
	assert_null(j, "exit_code");
	assert_bool(j, "timed_out", false);
	json_decref(j);
	outcome_free(&o);
}
END_TEST

/* A program that cannot start has an error and no exit code, and sbx says why. */
static void assert_cannot_start(const char *program, int want_status)
{
	struct outcome o;
	json_t *j;

	sbx(&o, "run", "--json", "--", program);
	ck_assert_int_eq(o.status, want_status);
	j = parse_json(&o);
	ck_assert_str_ne(str_of(j, "error"), "");
	assert_null(j, "exit_code");
	assert_null(j, "signal");
	json_decref(j);
	outcome_free(&o);

	sbx(&o, "run", "--", program);
	ck_assert_int_eq(o.status, want_status);
	ck_assert_msg(strncmp(o.err, "sbx: ", 5) == 0, "stderr: %s", o.err);
	outcome_free(&o);
}

START_TEST(missing_program_is_127)
{
	assert_cannot_start("/nonexistent/program", 127);
	assert_cannot_start("no-such-program-sbx-check", 127);
}
END_TEST

START_TEST(directory_is_126)
{
	assert_cannot_start("/tmp", 126);
}
END_TEST

START_TEST(file_without_exec_bit_is_126)
{
	char *dir = make_tmpdir(), path[PATH_MAX];

	snprintf(path, sizeof(path), "%s/script", dir);
	write_file(path, "#!/bin/sh\necho hi\n", 18, 0644);
	assert_cannot_start(path, 126);
	unlink(path);
	rmdir(dir);
}
END_TEST

/* After "--" a word that looks like an option is the program or an argument. */
START_TEST(words_after_dashdash_are_literal)
{
	struct outcome o;

	sbx(&o, "run", "--", "-nonexistent-sbx-check");
	ck_assert_int_eq(o.status, 127);
	ck_assert_ptr_null(strstr(o.err, "option"));
	outcome_free(&o);

	sbx(&o, "run", "--", "echo", "--json", "-c", "x", "--timeout");
	ck_assert_int_eq(o.status, 0);
	ck_assert_str_eq(o.out, "--json -c x --timeout\n");
	outcome_free(&o);
}
END_TEST

/* ------------------------------------------------------ time and processes */

START_TEST(timeout_is_124_and_kills)
{
	struct outcome o;
	char arg[32];
	json_t *j;

	snprintf(arg, sizeof(arg), "30.%d", (int)getpid());
	sbx(&o, "run", "--timeout", "1", "--", "sleep", arg);
	ck_assert_int_eq(o.status, 124);
	ck_assert_msg(o.seconds < 2.0, "took %.2f s", o.seconds);
	ck_assert_uint_eq(o.out_len, 0);
	assert_only_warnings(o.err);
	assert_no_process_with_arg(arg);
	outcome_free(&o);

	sbx(&o, "run", "--json", "--timeout", "0.5", "--", "sleep", arg);
	ck_assert_int_eq(o.status, 124);
	j = parse_json(&o);
	assert_bool(j, "timed_out", true);
	assert_null(j, "exit_code");
	json_decref(j);
	assert_no_process_with_arg(arg);
	outcome_free(&o);
}
END_TEST

START_TEST(background_child_does_not_hold_the_run)
{
	struct outcome o;
	char cmd[64], arg[32];
	json_t *j;

	snprintf(arg, sizeof(arg), "100.%d", (int)getpid());
	snprintf(cmd, sizeof(cmd), "sleep %s & echo done", arg);
	sbx(&o, "run", "--json", "-c", cmd);
	ck_assert_int_eq(o.status, 0);
	ck_assert_msg(o.seconds < 1.0, "took %.2f s", o.seconds);
	j = parse_json(&o);
	assert_str(j, "stdout", "done\n");
	json_decref(j);
	assert_no_process_with_arg(arg);
	outcome_free(&o);
}
END_TEST

/* A signal to sbx cancels the run, kills the command and ends sbx with 128+N. */
static const int cancel_signals[] = {SIGINT, SIGTERM, SIGHUP};

START_TEST(signal_to_sbx_kills_the_command)
{
	char arg[32];
	const char *const argv[] = {SBX_PATH, "run", "--", "sleep", arg, NULL};
	struct outcome o;
	struct proc p;

	snprintf(arg, sizeof(arg), "30.%d", (int)getpid());
	start_sbx(&p, argv, 0);
	wait_for_sleep(arg, p.pid);
	ck_assert_int_eq(kill(p.pid, cancel_signals[_i]), 0);
	finish_sbx(&p, &o);
	ck_assert_int_eq(o.status, 128 + cancel_signals[_i]);
	ck_assert_msg(o.seconds < 5.0, "took %.2f s", o.seconds);
	assert_no_process_with_arg(arg);
	outcome_free(&o);
}
END_TEST

START_TEST(max_output_keeps_exactly_the_cap)
{
	struct outcome o;
	json_t *j, *out;
	size_t i;

	sbx(&o, "run", "--json", "--max-output", "1K", "--timeout", "2", "--", "yes");
	ck_assert_int_eq(o.status, 124);
	j = parse_json(&o);
	out = key(j, "stdout");
	ck_assert(json_is_string(out));
	ck_assert_uint_eq(json_string_length(out), 1024);
	for (i = 0; i < 1024; i++)
		ck_assert_int_eq(json_string_value(out)[i], i % 2 ? '\n' : 'y');
	assert_bool(j, "stdout_truncated", true);
	ck_assert_int_gt(json_integer_value(key(j, "stdout_bytes")), 1024);
	ck_assert(array_has(key(key(j, "resources"), "limits_hit"), "output"));
	json_decref(j);
	outcome_free(&o);
}
END_TEST

START_TEST(max_output_zero_keeps_nothing)
{
	struct outcome o;
	json_t *j;

	sbx(&o, "run", "--json", "--max-output", "0", "--", "echo", "hi");
	ck_assert_int_eq(o.status, 0);
	j = parse_json(&o);
	assert_str(j, "stdout", "");
	assert_int(j, "stdout_bytes", 3);
	assert_bool(j, "stdout_truncated", true);
	json_decref(j);
	outcome_free(&o);
}
END_TEST

/* A reader that goes away costs the output, not sbx: it still ends the run. */
START_TEST(closed_stdout_does_not_kill_sbx)
{
	const char *const argv[] = {SBX_PATH, "run", "--timeout", "1", "--", "yes", NULL};
	struct outcome o;
	struct proc p;

	start_sbx(&p, argv, SPAWN_CLOSE_STDOUT);
	finish_sbx(&p, &o);
	ck_assert_int_eq(o.signal, 0);
	ck_assert_int_eq(o.status, 124);
	ck_assert_msg(o.seconds < 3.0, "took %.2f s", o.seconds);
	outcome_free(&o);
}
END_TEST

/* sbx ignores SIGPIPE for itself; the command must get the default back. */
START_TEST(command_does_not_inherit_ignored_sigpipe)
{
	struct outcome o;
	unsigned long long ignored;
	const char *line;

	sbx(&o, "run", "--", "cat", "/proc/self/status");
	ck_assert_int_eq(o.status, 0);
	line = strstr(o.out, "\nSigIgn:");
	ck_assert_ptr_nonnull(line);
	ignored = strtoull(line + strlen("\nSigIgn:"), NULL, 16);
	ck_assert_msg(!(ignored & (1ull << (SIGPIPE - 1))), "SigIgn %llx has SIGPIPE",
	              ignored);
	outcome_free(&o);
}
END_TEST

/* ------------------------------------------------------------------ options */

/* |value| appears in |text| between quotes of one of the usual kinds. */
static bool contains_quoted(const char *text, const char *value)
{
	static const char *const quotes[][2] = {{"'", "'"}, {"\"", "\""}, {"`", "'"},
	                                        {"\u2018", "\u2019"}};
	char want[256];
	size_t i;

	for (i = 0; i < sizeof(quotes) / sizeof(quotes[0]); i++) {
		snprintf(want, sizeof(want), "%s%s%s", quotes[i][0], value, quotes[i][1]);
		if (strstr(text, want))
			return true;
	}
	return false;
}

static const struct bad_option {
	const char *argv[10];
	const char *value; /* quoted in the message, or NULL */
} bad_options[] = {
	{{"run", "--memory", "123bogus", "--", "echo", "ran"}, "123bogus"},
	{{"run", "--memory", "0", "--", "echo", "ran"}, "0"},
	{{"run", "--memory", "-5", "--", "echo", "ran"}, "-5"},
	{{"run", "--max-file-size", "1.5Q", "--", "echo", "ran"}, "1.5Q"},
	{{"run", "--max-output", "12Q", "--", "echo", "ran"}, "12Q"},
	{{"run", "--cpus", "abc", "--", "echo", "ran"}, "abc"},
	{{"run", "--cpus", "0", "--", "echo", "ran"}, "0"},
	{{"run", "--cpus", "nan", "--", "echo", "ran"}, "nan"},
	{{"run", "--processes", "99999999999999999999999", "--", "echo", "ran"},
	 "99999999999999999999999"},
	{{"run", "--processes", "0", "--", "echo", "ran"}, "0"},
	{{"run", "--open-files", "+5", "--", "echo", "ran"}, "+5"},
	{{"run", "--open-files", " 5", "--", "echo", "ran"}, " 5"},
	{{"run", "--cpu-seconds", "1.5", "--", "echo", "ran"}, "1.5"},
	{{"run", "--cpu-seconds", "-1", "--", "echo", "ran"}, "-1"},
	{{"run", "--network", "maybe", "--", "echo", "ran"}, "maybe"},
	{{"run", "--memory-strategy", "sometimes", "--", "echo", "ran"}, "sometimes"},
	{{"run", "--backend", "chroot", "--", "echo", "ran"}, "chroot"},
	{{"run", "--timeout", "-1", "--", "echo", "ran"}, "-1"},
	{{"run", "--timeout", "soon", "--", "echo", "ran"}, "soon"},
	{{"run", "--timeout", "inf", "--", "echo", "ran"}, "inf"},
	{{"run", "--writable", "relative/dir", "--", "echo", "ran"}, "relative/dir"},
	{{"run", "--deny-read", "", "--", "echo", "ran"}, NULL},
	{{"run", "--env", "NOEQUALS", "--", "echo", "ran"}, "NOEQUALS"},
	{{"run", "--stdin", "/nonexistent/input", "--", "echo", "ran"}, "/nonexistent/input"},
	{{"run", "--input", "a", "--stdin", "/dev/null", "--", "echo", "ran"}, NULL},
	{{"run", "-w", "/nonexistent/workspace", "--", "echo", "ran"}, "/nonexistent/workspace"},
	{{"run", "-w", "/dev/null", "--", "echo", "ran"}, "/dev/null"},
	{{"run", "--bogus-option", "--", "echo", "ran"}, "--bogus-option"},
	{{"run", "-q", "--", "echo", "ran"}, "-q"},
	{{"run", "--memory"}, "--memory"},
	{{"run"}, NULL},
	{{"run", "--json", "--"}, NULL},
	{{"run", "-c", "echo ran", "--", "echo", "ran"}, NULL},
	{{"run", "-c", "echo ran", "echo", "ran"}, NULL},
};

START_TEST(bad_option_is_125)
{
	const struct bad_option *b = &bad_options[_i];
	const char *argv[12] = {SBX_PATH};
	struct outcome o;
	size_t i;

	for (i = 0; b->argv[i]; i++)
		argv[i + 1] = b->argv[i];
	run_argv(&o, argv, 0);
	ck_assert_int_eq(o.status, 125);
	ck_assert_uint_eq(o.out_len, 0);
	ck_assert_msg(strncmp(o.err, "sbx: ", 5) == 0, "stderr: %s", o.err);
	ck_assert_msg(strchr(o.err, '\n') == o.err + o.err_len - 1,
	              "not one line: %s", o.err);
	if (b->value)
		ck_assert_msg(contains_quoted(o.err, b->value), "'%s' not quoted in: %s",
		              b->value, o.err);
	outcome_free(&o);
}
END_TEST

START_TEST(require_isolation_refuses_passthrough)
{
	struct outcome o;

	sbx(&o, "run", "--backend", "passthrough", "--require-isolation", "--", "echo", "ran");
	ck_assert_int_eq(o.status, 125);
	ck_assert_uint_eq(o.out_len, 0);
	ck_assert_msg(strncmp(o.err, "sbx: ", 5) == 0, "stderr: %s", o.err);
	outcome_free(&o);
}
END_TEST

START_TEST(help_and_version)
{
	struct outcome o;

	sbx(&o, "--help");
	ck_assert_int_eq(o.status, 0);
	ck_assert_ptr_nonnull(strstr(o.out, "usage: sbx run"));
	ck_assert_ptr_nonnull(strstr(o.out, "--workspace"));
	outcome_free(&o);

	sbx(&o, "run", "--help");
	ck_assert_int_eq(o.status, 0);
	ck_assert_ptr_nonnull(strstr(o.out, "--max-output"));
	outcome_free(&o);

	sbx(&o, "--version");
	ck_assert_int_eq(o.status, 0);
	ck_assert_msg(strncmp(o.out, "sbx ", 4) == 0 && o.out[4] >= '0' && o.out[4] <= '9',
	              "version: %s", o.out);
	outcome_free(&o);
}
END_TEST

START_TEST(usage_errors_are_125)
{
	const char *const no_args[] = {SBX_PATH, NULL};
	struct outcome o;

	run_argv(&o, no_args, 0);
	ck_assert_int_eq(o.status, 125);
	ck_assert_ptr_nonnull(strstr(o.err, "usage:"));
	outcome_free(&o);

	sbx(&o, "frobnicate");
	ck_assert_int_eq(o.status, 125);
	ck_assert(contains_quoted(o.err, "frobnicate"));
	outcome_free(&o);

	sbx(&o, "--frobnicate");
	ck_assert_int_eq(o.status, 125);
	ck_assert(contains_quoted(o.err, "--frobnicate"));
	outcome_free(&o);
}
END_TEST

/* sbx bench measures the floor and the backend in one invocation. */
START_TEST(bench_reports_floor_and_backend)
{
	struct outcome o;
	json_t *root;

	sbx(&o, "bench", "--runs", "20", "--concurrency", "4", "--backend", "passthrough", "--json");
	ck_assert_msg(o.status == 0, "status %d: %s", o.status, o.err);
	root = parse_json(&o);
	assert_int(root, "runs", 20);
	assert_int(root, "concurrency", 4);
	assert_int(root, "failed", 0);
	ck_assert(json_real_value(key(key(root, "floor"), "runs_per_second")) > 0);
	ck_assert(json_real_value(key(key(root, "passthrough"), "p99_ms")) > 0);
	ck_assert(json_real_value(key(root, "ratio")) > 0);
	json_decref(root);
	outcome_free(&o);

	sbx(&o, "bench", "--runs", "12x");
	ck_assert_int_eq(o.status, 125);
	ck_assert(contains_quoted(o.err, "12x"));
	outcome_free(&o);
	sbx(&o, "bench", "--", "true");
	ck_assert_int_eq(o.status, 125);
	ck_assert(contains_quoted(o.err, "true"));
	outcome_free(&o);
}
END_TEST

START_TEST(workspace_is_the_cwd)
{
	char *dir = make_tmpdir(), *real, want[PATH_MAX + 2], path[PATH_MAX];
	struct outcome o;
	struct stat st;

	real = realpath(dir, NULL);
	ck_assert_ptr_nonnull(real);
	snprintf(want, sizeof(want), "%s\n", real);
	sbx(&o, "run", "-w", dir, "--", "pwd");
	ck_assert_int_eq(o.status, 0);
	ck_assert_str_eq(o.out, want);
	outcome_free(&o);

	sbx(&o, "run", "--workspace", dir, "-c", "echo hi > made");
	ck_assert_int_eq(o.status, 0);
	snprintf(path, sizeof(path), "%s/made", real);
	ck_assert_int_eq(stat(path, &st), 0);
	ck_assert_int_eq(st.st_size, 3);
	outcome_free(&o);
	unlink(path);
	rmdir(real);
	free(real);
}
END_TEST

/* Without -w the run gets a private workspace under $TMPDIR, gone when sbx exits. */
START_TEST(private_workspace_without_w)
{
	char *dir = make_tmpdir(), *real;
	struct outcome o;

	real = realpath(dir, NULL);
	ck_assert_ptr_nonnull(real);
	setenv("TMPDIR", real, 1);
	sbx(&o, "run", "--backend", "passthrough", "-c", "pwd; echo \"$TMPDIR\"; echo x > made");
	ck_assert_int_eq(o.status, 0);
	ck_assert_msg(strncmp(o.out, real, strlen(real)) == 0, "ran in %s, not under %s", o.out, real);
	ck_assert_msg(strstr(o.out, "/workspace\n") && strstr(o.out, "/tmp\n"), "output: %s", o.out);
	outcome_free(&o);
	ck_assert_int_eq(rmdir(real), 0); /* empty: the session took its directory with it */
	free(real);
}
END_TEST

START_TEST(env_sets_variables)
{
	struct outcome o;

	sbx(&o, "run", "--env", "FOO=bar", "--", "sh", "-c", "echo $FOO");
	ck_assert_int_eq(o.status, 0);
	ck_assert_str_eq(o.out, "bar\n");
	outcome_free(&o);

	sbx(&o, "run", "--env", "FOO=a", "--env", "FOO=b c", "--", "sh", "-c", "echo \"$FOO\"");
	ck_assert_str_eq(o.out, "b c\n");
	outcome_free(&o);
}
END_TEST

START_TEST(input_feeds_stdin)
{
	struct outcome o;

	sbx(&o, "run", "--input", "hello", "--", "cat");
	ck_assert_int_eq(o.status, 0);
	ck_assert_str_eq(o.out, "hello");
	outcome_free(&o);
}
END_TEST

START_TEST(stdin_file_feeds_stdin)
{
	static const char data[] = "line 1\n\0binary \377\n";
	char *dir = make_tmpdir(), path[PATH_MAX];
	struct outcome o;

	snprintf(path, sizeof(path), "%s/input", dir);
	write_file(path, data, sizeof(data) - 1, 0600);
	sbx(&o, "run", "--stdin", path, "--", "cat");
	ck_assert_int_eq(o.status, 0);
	ck_assert_uint_eq(o.out_len, sizeof(data) - 1);
	ck_assert(memcmp(o.out, data, sizeof(data) - 1) == 0);
	outcome_free(&o);
	unlink(path);
	rmdir(dir);
}
END_TEST

/* Without --input or --stdin the command reads end-of-file, not sbx's stdin. */
START_TEST(no_input_is_empty_stdin)
{
	const char *const argv[] = {SBX_PATH, "run", "--timeout", "5", "--", "cat", NULL};
	struct outcome o;

	run_argv(&o, argv, SPAWN_OPEN_STDIN);
	ck_assert_int_eq(o.status, 0);
	ck_assert_uint_eq(o.out_len, 0);
	outcome_free(&o);
}
END_TEST

START_TEST(argv_passes_intact)
{
	struct outcome o;

	sbx(&o, "run", "--", "printf", "%s|", "a b", "it's", "x\"y", "l1\nl2", "", "$HOME", "*");
	ck_assert_int_eq(o.status, 0);
	ck_assert_str_eq(o.out, "a b|it's|x\"y|l1\nl2||$HOME|*|");
	outcome_free(&o);
}
END_TEST

/* ------------------------------------------------------------------- UTF-8 */

static const struct utf8_case {
	const char *printf_format; /* what the command prints, as printf(1) escapes */
	const char *want;          /* the JSON string's bytes */
	size_t want_len;
} utf8_cases[] = {
	{"\\377a", FFFD "a", 4},
	{"\\342\\202\\254", "\xE2\x82\xAC", 3},         /* the euro sign stays */
	{"\\360\\237\\230\\200", "\xF0\x9F\x98\x80", 4}, /* so does U+1F600 */
	{"\\342\\202", FFFD, 3},                         /* a cut sequence is one */
	{"\\342\\202x", FFFD "x", 4},
	{"\\300\\200", FFFD FFFD, 6},                    /* overlong NUL */
	{"\\355\\240\\200", FFFD FFFD FFFD, 9},          /* a surrogate */
	{"\\364\\220\\200\\200", FFFD FFFD FFFD FFFD, 12}, /* past U+10FFFF */
	{"a\\0b", "a\0b", 3},
	{"\\0\\377\\0", "\0" FFFD "\0", 5},
};

START_TEST(invalid_utf8_becomes_fffd)
{
	const struct utf8_case *c = &utf8_cases[_i];
	struct outcome o;
	json_t *j, *out;

	sbx(&o, "run", "--json", "--", "printf", c->printf_format);
	ck_assert_int_eq(o.status, 0);
	j = parse_json(&o);
	out = key(j, "stdout");
	ck_assert(json_is_string(out));
	ck_assert_uint_eq(json_string_length(out), c->want_len);
	ck_assert(memcmp(json_string_value(out), c->want, c->want_len) == 0);
	json_decref(j);
	outcome_free(&o);
}
END_TEST

/* An error that quotes a program name of any bytes still makes valid JSON. */
START_TEST(error_text_is_made_utf8)
{
	struct outcome o;
	json_t *j;

	sbx(&o, "run", "--json", "--", "/nonexistent/\377name");
	ck_assert_int_eq(o.status, 127);
	j = parse_json(&o);
	ck_assert(json_is_string(key(j, "error")));
	json_decref(j);
	outcome_free(&o);
}
END_TEST

/* -------------------------------------------------------------------- suite */

#define N_ELEMS(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* ------------------------------------------------------------ wrap and caps */

/* The real sbx binary behind the libtool wrapper, and its library. */
static const char *real_sbx(void)
{
	static char path[PATH_MAX];
	snprintf(path, sizeof path, "%s/src/.libs/sbx", SBX_TOP_BUILDDIR);
	if (access(path, X_OK) != 0)
		snprintf(path, sizeof path, "%s", SBX_PATH);
	setenv("LD_LIBRARY_PATH", SBX_TOP_BUILDDIR "/lib/.libs", 1);
	return path;
}

/*
 * The command of both runs: it writes into the writable directory, tries to
 * write outside it, reads its environment, counts its network interfaces and
 * exits 4.  Everything it prints must be the same both ways.
 */
#define WRAP_SCRIPT                                                                  \
	"echo out; echo data > \"$W/f\"; (echo x > /var/tmp/sbx-wrap-probe) 2>/dev/null " \
	"|| echo read-only; echo \"$FOO\"; tail -n +3 /proc/net/dev | wc -l; "            \
	"ls /proc | grep -c '^[0-9]'; exit 4"

START_TEST(wrap_run_by_hand_behaves_like_run)
{
	char *dir = make_tmpdir(), w_env[PATH_MAX + 4], file[PATH_MAX + 4];
	struct outcome run_o, wrap_o, hand_o;

	snprintf(w_env, sizeof w_env, "W=%s", dir);
	snprintf(file, sizeof file, "%s/f", dir);
	sbx(&run_o, "run", "--backend", "bwrap", "--writable", dir, "--env", "FOO=bar", "--env", w_env,
	    "--", "sh", "-c", WRAP_SCRIPT);
	ck_assert_msg(run_o.status == 4, "run: %d %s", run_o.status, run_o.err);
	ck_assert_int_eq(unlink(file), 0);

	sbx(&wrap_o, "wrap", "--backend", "bwrap", "--writable", dir, "--env", "FOO=bar", "--env",
	    w_env, "--", "sh", "-c", WRAP_SCRIPT);
	ck_assert_msg(wrap_o.status == 0, "wrap: %d %s", wrap_o.status, wrap_o.err);
	json_error_t jerr;
	json_t *arr = json_loadb(wrap_o.out, wrap_o.out_len, 0, &jerr);
	ck_assert_msg(json_is_array(arr), "wrap did not print a JSON array: %s", wrap_o.out);
	size_t n = json_array_size(arr);
	const char **argv = calloc(n + 1, sizeof *argv);
	for (size_t i = 0; i < n; i++) {
		ck_assert(json_is_string(json_array_get(arr, i)));
		argv[i] = json_string_value(json_array_get(arr, i));
	}
	ck_assert_str_eq(argv[n - 1], WRAP_SCRIPT);

	/* Run by hand, from this test's environment, which is not the run's. */
	setenv("FOO", "leaked", 1);
	run_argv(&hand_o, argv, 0);
	ck_assert_int_eq(hand_o.status, 4);
	ck_assert_str_eq(hand_o.out, run_o.out);
	ck_assert_msg(strncmp(run_o.out, "out\nread-only\nbar\n1\n", 20) == 0, "%s", run_o.out);
	ck_assert_int_eq(access(file, F_OK), 0);
	ck_assert_int_eq(access("/var/tmp/sbx-wrap-probe", F_OK), -1);
	unlink(file);
	rmdir(dir);
	free(argv);
	json_decref(arr);
	outcome_free(&run_o);
	outcome_free(&wrap_o);
	outcome_free(&hand_o);
}
END_TEST

START_TEST(caps_json_reports_without_side_effects)
{
	/* strace follows every process sbx might start and every file or
	 * directory it might create. */
	char log[] = "/tmp/sbx-caps-strace-XXXXXX";
	int fd = mkstemp(log);
	ck_assert_int_ge(fd, 0);
	close(fd);
	struct outcome o;
	const char *argv[] = { "/usr/bin/strace", "-f", "-qq", "-o", log, "-e",
	                       "trace=clone,clone3,fork,vfork,execve,mkdir,mkdirat,creat,unshare,"
	                       "mount,openat,open",
	                       real_sbx(), "caps", "--json", NULL };
	if (access(argv[0], X_OK) != 0) {
		unlink(log);
		ck_abort_msg("strace is not installed (dev/packages lists it)");
	}
	/* LeakSanitizer cannot work under ptrace; the other suites cover leaks. */
	setenv("ASAN_OPTIONS", "detect_leaks=0", 1);
	run_argv(&o, argv, 0);
	ck_assert_msg(o.status == 0, "caps: %s", o.err);
	json_t *j = parse_json(&o);
	ck_assert(json_is_object(json_object_get(j, "backends")));
	ck_assert(json_is_object(json_object_get(j, "features")));
	ck_assert(json_is_object(json_object_get(j, "limits")));
	json_t *bw = json_object_get(json_object_get(j, "backends"), "bwrap");
	ck_assert(json_is_boolean(json_object_get(bw, "available")));
	ck_assert(json_is_string(json_object_get(bw, "detail")));
	json_decref(j);

	FILE *f = fopen(log, "r");
	ck_assert_ptr_nonnull(f);
	char line[1024];
	int execs = 0;
	while (fgets(line, sizeof line, f)) {
		ck_assert_msg(!strstr(line, "clone") && !strstr(line, "fork(") && !strstr(line, "mkdir") &&
		              !strstr(line, "creat(") && !strstr(line, "O_CREAT") &&
		              !strstr(line, "unshare") && !strstr(line, "mount("),
		              "sbx caps did more than read: %s", line);
		execs += strstr(line, "execve(") != NULL;
	}
	fclose(f);
	unlink(log);
	ck_assert_int_eq(execs, 1);
	outcome_free(&o);
}
END_TEST

static Suite *cli_suite(void)
{
	Suite *s = suite_create("cli");
	TCase *tc;

	tc = tcase_create("result");
	tcase_set_timeout(tc, 10);
	tcase_add_test(tc, json_result_has_every_key);
	tcase_add_test(tc, plain_output_streams_through);
	tcase_add_test(tc, auto_backend_is_named);
	tcase_add_test(tc, mechanisms_name_the_limits_asked_for);
	tcase_add_test(tc, warnings_go_to_stderr_without_json);
	suite_add_tcase(s, tc);

	tc = tcase_create("status");
	tcase_set_timeout(tc, 10);
	tcase_add_test(tc, exit_code_is_the_commands);
	tcase_add_test(tc, signal_is_128_plus_n);
	tcase_add_test(tc, missing_program_is_127);
	tcase_add_test(tc, directory_is_126);
	tcase_add_test(tc, file_without_exec_bit_is_126);
	tcase_add_test(tc, words_after_dashdash_are_literal);
	suite_add_tcase(s, tc);

	tc = tcase_create("ending");
	tcase_set_timeout(tc, 20);
	tcase_add_test(tc, timeout_is_124_and_kills);
	tcase_add_test(tc, background_child_does_not_hold_the_run);
	tcase_add_loop_test(tc, signal_to_sbx_kills_the_command, 0, N_ELEMS(cancel_signals));
	tcase_add_test(tc, max_output_keeps_exactly_the_cap);
	tcase_add_test(tc, max_output_zero_keeps_nothing);
	tcase_add_test(tc, closed_stdout_does_not_kill_sbx);
	tcase_add_test(tc, command_does_not_inherit_ignored_sigpipe);
	suite_add_tcase(s, tc);

	tc = tcase_create("options");
	tcase_set_timeout(tc, 10);
	tcase_add_loop_test(tc, bad_option_is_125, 0, N_ELEMS(bad_options));
	tcase_add_test(tc, require_isolation_refuses_passthrough);
	tcase_add_test(tc, help_and_version);
	tcase_add_test(tc, usage_errors_are_125);
	tcase_add_test(tc, bench_reports_floor_and_backend);
	tcase_add_test(tc, workspace_is_the_cwd);
	tcase_add_test(tc, private_workspace_without_w);
	tcase_add_test(tc, env_sets_variables);
	tcase_add_test(tc, input_feeds_stdin);
	tcase_add_test(tc, stdin_file_feeds_stdin);
	tcase_add_test(tc, no_input_is_empty_stdin);
	tcase_add_test(tc, argv_passes_intact);
	suite_add_tcase(s, tc);

	tc = tcase_create("inspect");
	tcase_set_timeout(tc, 20);
	tcase_add_test(tc, wrap_run_by_hand_behaves_like_run);
	tcase_add_test(tc, caps_json_reports_without_side_effects);
	suite_add_tcase(s, tc);

	tc = tcase_create("utf8");
	tcase_set_timeout(tc, 10);
	tcase_add_loop_test(tc, invalid_utf8_becomes_fffd, 0, N_ELEMS(utf8_cases));
	tcase_add_test(tc, error_text_is_made_utf8);
	suite_add_tcase(s, tc);
	return s;
}

/*
 * When the build is shared, src/sbx is a libtool wrapper that may relink the
 * program the first time it runs; one run up front keeps that out of the
 * timed tests.
 */
static void warm_up(void)
{
	pid_t pid = fork();
	int ws;

	if (pid == 0) {
		int null = open("/dev/null", O_WRONLY);

		dup2(null, STDOUT_FILENO);
		execl(SBX_PATH, SBX_PATH, "--version", (char *)NULL);
		_exit(99);
	}
	if (pid > 0)
		waitpid(pid, &ws, 0);
}

int main(void)
{
	SRunner *sr = srunner_create(cli_suite());
	int failures;

	warm_up();
	srunner_run_all(sr, CK_ENV);
	failures = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failures ? 1 : 0;
}
