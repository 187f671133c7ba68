/*
 * run.c -- one command in flight: a nonblocking state machine on the loop.
 *
 * The states are in internal.h.  Every event of a run lands in run_step(),
 * which is the one place that decides a transition; the event callbacks only
 * translate libevent's calls into run events.
 *
 * Ending a run, in order:
 *   1. the child exits: its pidfd becomes readable;
 *   2. whatever is left of its process group is killed while the child is
 *      still an unreaped zombie, so the group id cannot have been recycled;
 *   3. the child is reaped with wait4(pid), which also gives its rusage;
 *   4. the pipes are drained to end-of-file, for at most GRACE_SECONDS more:
 *      a process that escaped the group (setsid) and still holds a pipe
 *      cannot keep the run open;
 *   5. everything the run holds is released, and only then is the callback
 *      called, with the result it now owns.  Nothing of the run is touched
 *      after the callback, which may free the sandbox.
 */
#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <event2/event.h>

#include "internal.h"
#include "watchdog.h"

/* How long the pipes may stay open after the child is reaped. */
#define GRACE_SECONDS 0.2
/* A pipe's capacity: large writes drain in few wake-ups. */
#define PIPE_CAPACITY (256 * 1024)
/* Reads per wake-up of one stream, so an endless writer cannot starve the loop. */
#define READS_PER_WAKEUP 16
/* How often a child is polled for its exit where there are no pidfds. */
#define EXIT_POLL_US 5000
/* How long freeing a sandbox waits for a SIGKILLed child to die. */
#define ABANDON_WAIT_MS 5000

enum run_event {
	RUN_START,       /* a start slot is free */
	RUN_CHILD_EXIT,  /* the pidfd is readable */
	RUN_OUT_EOF,     /* one of the output pipes is done */
	RUN_TIMEOUT,     /* the wall clock ran out, or the grace after exit did */
	RUN_CANCEL,      /* sbx_run_cancel() */
	RUN_FINISH,      /* deferred: finish from the loop */
};

__thread struct event_base *sbx__callback_base;

static void run_step(sbx_run *run, enum run_event ev);

/* ----------------------------------------------------------------- options */

void sbx_run_options_init(sbx_run_options *o)
{
	memset(o, 0, sizeof *o);
	o->timeout = 60;
	o->max_output = 1024 * 1024;
}

static int result_new(sbx_run *run)
{
	sbx_result *r = calloc(1, sizeof *r);
	if (!r)
		return -ENOMEM;
	r->exit_code = -1;
	r->backend = run->sb->backend->name;
	r->isolated = run->sb->backend->isolated;
	r->resources.peak_memory_bytes = -1;
	memcpy(r->resources.mechanisms, run->sb->plan.mech, sizeof r->resources.mechanisms);
	run->res = r;
	return 0;
}

/* Adds a warning to the result; silently drops it past SBX_MAX_WARNINGS. */
static void result_warn(sbx_result *r, const char *text)
{
	if (r->resources.nwarnings < SBX_MAX_WARNINGS) {
		char *copy = strdup(text);
		if (copy)
			r->resources.warnings[r->resources.nwarnings++] = copy;
	}
}

static void result_error(sbx_result *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void result_error(sbx_result *r, const char *fmt, ...)
{
	char buf[SBX_ERROR_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	free(r->error);
	r->error = strdup(buf);
}

static void run_free(sbx_run *run)
{
	sbx__strv_free(&run->argv);
	sbx__strv_free(&run->env);
	free(run->cwd);
	free(run->stdin_data);
	sbx_result_free(run->res);
	if (run->ev_timer)
		event_free(run->ev_timer);
	free(run);
}

static void on_timer(evutil_socket_t fd, short what, void *arg);

int sbx_run_start(sbx_sandbox *sb, const sbx_run_options *o, sbx_run_cb cb, void *arg,
                  sbx_run **out, sbx_error *err)
{
	if (sb->closing)
		return sbx__error(err, SBX_ECLOSED, "the sandbox is being freed; no run can start");
	if (!o || !cb)
		return sbx__error(err, -EINVAL, "sbx_run_start needs options and a callback");
	if (!(o->timeout >= 0) || o->timeout > 1e9)
		return sbx__error(err, -EINVAL, "timeout must be zero (none) or a positive number of seconds: %g",
		                  o->timeout);
	if (o->max_output > SIZE_MAX / 2)
		return sbx__error(err, -EINVAL, "max_output is too large: %zu", o->max_output);
	int rc = sbx__command_check(o, err);
	if (rc < 0)
		return rc;

	sbx_run *run = calloc(1, sizeof *run);
	if (!run)
		return sbx__error(err, -ENOMEM, "out of memory starting a run");
	run->sb = sb;
	run->pid = 0;
	run->pidfd = run->fd_in = run->fd_out[0] = run->fd_out[1] = -1;
	run->fd_status = run->inner_pidfd = run->inner_exit = -1;
	run->timeout = o->timeout;
	run->max_output = o->max_output;
	run->on_output = o->on_output;
	run->on_output_arg = o->on_output_arg;
	run->cb = cb;
	run->cb_arg = arg;

	run->shell = o->shell != NULL;
	rc = sbx__command_build(sb->policy, o, &run->argv, &run->env, &run->cwd);
	if (rc == 0 && o->stdin_data) {
		run->stdin_len = o->stdin_len;
		run->stdin_data = malloc(o->stdin_len ? o->stdin_len : 1);
		if (run->stdin_data)
			memcpy(run->stdin_data, o->stdin_data, o->stdin_len);
		else
			rc = -ENOMEM;
	}
	if (rc == 0)
		rc = result_new(run);
	if (rc == 0 && !(run->ev_timer = event_new(sb->base, -1, 0, on_timer, run)))
		rc = -ENOMEM;
	if (rc < 0) {
		run_free(run);
		return sbx__error(err, rc, "out of memory starting a run");
	}

	run->state = SBX__RUN_QUEUED;
	sbx__sandbox_link(sb, run);
	if (sbx__sandbox_may_spawn(sb)) {
		/* Start now, so that running out of fds or memory is the caller's
		 * error here rather than a result later. */
		rc = sbx__run_spawn(run, err);
		if (rc < 0) {
			sbx__sandbox_unlink(sb, run);
			run_free(run);
			return rc;
		}
	} else {
		sbx__sandbox_enqueue(sb, run);
	}
	if (out)
		*out = run;
	return 0;
}

/* ------------------------------------------------------------------- events */

static void on_exit_event(evutil_socket_t fd, short what, void *arg)
{
	sbx_run *run = arg;
	/* Without a pidfd this is a periodic timer that asks the kernel. */
	if (run->pidfd < 0 && !sbx__exited(run->pid))
		return;
	run_step(run, RUN_CHILD_EXIT);
}

static void on_timer(evutil_socket_t fd, short what, void *arg)
{
	sbx_run *run = arg;
	if (run->finish_pending)
		run_step(run, RUN_FINISH);
	else
		run_step(run, RUN_TIMEOUT);
}

static void close_fd(int *fd)
{
	if (*fd >= 0) {
		close(*fd);
		*fd = -1;
	}
}

static void drop_event(struct event **ev)
{
	if (*ev) {
		event_free(*ev);
		*ev = NULL;
	}
}

/* ------------------------------------------------------------------ output */

/* Keeps what fits of |n| bytes that arrived on |stream| and counts them all. */
static void take_output(sbx_run *run, int stream, const char *data, size_t n)
{
	sbx_output *o = &run->res->out[stream];
	o->total += n;
	size_t keep = run->max_output - o->len;
	if (keep > n)
		keep = n;
	if (keep > 0) {
		size_t need = o->len + keep + 1;
		if (need > run->cap[stream]) {
			size_t cap = run->cap[stream] ? run->cap[stream] : 4096;
			while (cap < need)
				cap *= 2;
			if (cap > run->max_output + 1)
				cap = run->max_output + 1;
			char *data2 = realloc(o->data, cap);
			if (!data2) {
				/* Nothing is lost but kept bytes: the total still counts. */
				keep = 0;
			} else {
				o->data = data2;
				run->cap[stream] = cap;
			}
		}
		if (keep) {
			memcpy(o->data + o->len, data, keep);
			o->len += keep;
		}
	}
	if (run->on_output) {
		struct event_base *outer = sbx__callback_base;
		sbx__callback_base = run->sb->base;
		run->on_output((enum sbx_stream)stream, data, n, run->on_output_arg);
		sbx__callback_base = outer;
	}
}

/*
 * Reads what one output pipe holds, up to |budget| reads, into the
 * sandbox's scratch buffer.  Returns true at end-of-file or on a read error.
 */
static bool drain(sbx_run *run, int stream, int budget)
{
	char *buf = run->sb->scratch;
	while (budget-- > 0) {
		ssize_t n = read(run->fd_out[stream], buf, SBX__SCRATCH_SIZE);
		if (n > 0) {
			take_output(run, stream, buf, (size_t)n);
			continue;
		}
		if (n == 0)
			return true;
		if (errno == EINTR) {
			budget++;
			continue;
		}
		return errno != EAGAIN;
	}
	return false;
}

static void close_output(sbx_run *run, int stream)
{
	drop_event(&run->ev_out[stream]);
	close_fd(&run->fd_out[stream]);
}

static void on_output(sbx_run *run, int stream)
{
	if (drain(run, stream, READS_PER_WAKEUP)) {
		close_output(run, stream);
		run_step(run, RUN_OUT_EOF);
	}
}

static void on_stdout(evutil_socket_t fd, short what, void *arg)
{
	on_output(arg, SBX_STDOUT);
}

static void on_stderr(evutil_socket_t fd, short what, void *arg)
{
	on_output(arg, SBX_STDERR);
}

/* ------------------------------------------------------------------- stdin */

/*
 * write() without SIGPIPE: a child that stops reading its stdin must not
 * kill the host.  The library may not touch the process's disposition, so
 * SIGPIPE is blocked for this thread around the write, and a SIGPIPE the
 * write raised is taken off the pending set before unblocking (unless one
 * was already pending, which belongs to someone else).
 */
static ssize_t write_nosigpipe(int fd, const void *buf, size_t len)
{
	sigset_t pipe_only, saved, pending;
	sigemptyset(&pipe_only);
	sigaddset(&pipe_only, SIGPIPE);
	sigpending(&pending);
	bool was_pending = sigismember(&pending, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &pipe_only, &saved);
	ssize_t n = write(fd, buf, len);
	int e = errno;
	if (n < 0 && e == EPIPE && !was_pending) {
		static const struct timespec zero = { 0, 0 };
		while (sigtimedwait(&pipe_only, NULL, &zero) < 0 && errno == EINTR)
			;
	}
	pthread_sigmask(SIG_SETMASK, &saved, NULL);
	errno = e;
	return n;
}

static void close_stdin(sbx_run *run)
{
	drop_event(&run->ev_in);
	close_fd(&run->fd_in);
}

static void on_stdin(evutil_socket_t fd, short what, void *arg)
{
	sbx_run *run = arg;
	while (run->stdin_off < run->stdin_len) {
		ssize_t n = write_nosigpipe(run->fd_in, run->stdin_data + run->stdin_off,
		                            run->stdin_len - run->stdin_off);
		if (n > 0) {
			run->stdin_off += (size_t)n;
		} else if (n < 0 && errno == EINTR) {
			continue;
		} else if (n < 0 && errno == EAGAIN) {
			return;
		} else {
			/* EPIPE: the child stopped reading, which is its business. */
			break;
		}
	}
	close_stdin(run);
}

/* ------------------------------------------------------------------ status */

static void close_status(sbx_run *run)
{
	drop_event(&run->ev_status);
	close_fd(&run->fd_status);
}

/* The integer after "|key|": in one line of the backend's JSON status. */
static bool status_field(const char *line, const char *key, long *value)
{
	const char *p = strstr(line, key);
	if (!p)
		return false;
	p += strlen(key);
	while (*p == ' ' || *p == ':')
		p++;
	char *end;
	errno = 0;
	long v = strtol(p, &end, 10);
	if (end == p || errno)
		return false;
	*value = v;
	return true;
}

/*
 * Takes the lines the backend wrote so far.  The sandbox's first process is
 * not our child, so its pidfd is checked against /proc after opening: a pid
 * that was recycled before we got to it has another parent.
 */
static void take_status(sbx_run *run)
{
	char *line = run->status_buf, *nl;
	while ((nl = memchr(line, '\n', run->status_len - (size_t)(line - run->status_buf)))) {
		*nl = '\0';
		long v;
		if (status_field(line, "\"child-pid\"", &v) && v > 0 && run->inner_pid == 0) {
			run->inner_pid = (pid_t)v;
			int fd = (int)syscall(SYS_pidfd_open, (pid_t)v, 0);
			if (fd >= 0 && sbx__parent_of((pid_t)v) == run->pid)
				run->inner_pidfd = fd;
			else if (fd >= 0)
				close(fd);
		}
		if (status_field(line, "\"exit-code\"", &v) && v >= 0 && v <= 255)
			run->inner_exit = (int)v;
		line = nl + 1;
	}
	size_t rest = run->status_len - (size_t)(line - run->status_buf);
	memmove(run->status_buf, line, rest);
	run->status_len = rest;
}

/* Reads what the backend reported; returns true when the pipe is done. */
static bool read_status(sbx_run *run)
{
	for (;;) {
		size_t room = sizeof run->status_buf - 1 - run->status_len;
		if (room == 0)
			run->status_len = 0; /* a line this long is not a report */
		ssize_t n = read(run->fd_status, run->status_buf + run->status_len,
		                 sizeof run->status_buf - 1 - run->status_len);
		if (n > 0) {
			run->status_len += (size_t)n;
			take_status(run);
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		return n == 0 || errno != EAGAIN;
	}
}

static void on_status(evutil_socket_t fd, short what, void *arg)
{
	sbx_run *run = arg;
	if (read_status(run))
		close_status(run);
}

/* ------------------------------------------------------------------ spawn */

/* A pipe whose ends are both clear of stdio and fd 3, close-on-exec, with our end
 * (|ours|: 0 read, 1 write) nonblocking. */
static int make_pipe(int fds[2], int ours)
{
	if (pipe2(fds, O_CLOEXEC) < 0)
		return -errno;
	int rc = sbx__fd_move_high(&fds[0]);
	if (rc == 0)
		rc = sbx__fd_move_high(&fds[1]);
	if (rc == 0 && fcntl(fds[ours], F_SETFL, O_NONBLOCK) < 0)
		rc = -errno;
	if (rc < 0) {
		close(fds[0]);
		close(fds[1]);
		fds[0] = fds[1] = -1;
	}
	return rc;
}

static void finish_later(sbx_run *run)
{
	if (!run->finish_pending) {
		run->finish_pending = true;
		event_active(run->ev_timer, EV_TIMEOUT, 1);
	}
}

static void record_start_failure(sbx_run *run, enum sbx__stage stage, int e)
{
	sbx_result *r = run->res;
	r->start_errno = e;
	switch (stage) {
	case SBX__STAGE_EXEC:
		result_error(r, "could not start '%s': %s", run->argv.v[0], strerrordesc_np(e));
		break;
	case SBX__STAGE_CWD:
		result_error(r, "could not change to directory '%s': %s", run->cwd, strerrordesc_np(e));
		break;
	default:
		result_error(r, "could not set up the process for '%s': %s", run->argv.v[0],
		             strerrordesc_np(e));
		break;
	}
}

static void kill_tree(sbx_run *run);

/* The watchdog found the tree over its memory limit. */
static void on_watchdog(void *arg)
{
	sbx_run *run = arg;
	run->hit_memory = true;
	kill_tree(run);
}

/* The whole environment of a wrapper program such as bwrap. */
static const char *const wrapper_env[] = { "PATH=/usr/sbin:/usr/bin:/sbin:/bin", NULL };

/* Could not start: the run finishes on the next turn with the reason. */
static void start_failed(sbx_run *run, enum sbx__stage stage, int e)
{
	record_start_failure(run, stage, e);
	run->res->resources.wall_seconds = sbx__seconds_since(&run->t0);
	run->state = SBX__RUN_DRAINING;
	finish_later(run);
}

int sbx__run_spawn(sbx_run *run, sbx_error *err)
{
	sbx_sandbox *sb = run->sb;
	const struct sbx__backend *be = sb->backend;
	clock_gettime(CLOCK_MONOTONIC, &run->t0);

	char program[PATH_MAX];
	int e = sbx__resolve_program(run->argv.v[0], &run->env, run->cwd, program, sizeof program);
	if (e) {
		start_failed(run, SBX__STAGE_EXEC, e);
		return 0;
	}
	sbx__strv wrapped = {0};
	struct sbx__fds pass = {0};
	if (be->wrap) {
		struct sbx__command cmd = { run->argv.v, run->env.v, program, run->cwd };
		int rc = be->wrap(sb, &cmd, be->status_fd, &wrapped, &pass, err);
		if (rc < 0) {
			sbx__fds_close(&pass);
			return rc;
		}
	}

	/* The run's cgroups, named after this process so that a later start
	 * can tell they are stale once it is gone. */
	if (sb->plan.use_cgroup) {
		static unsigned seq;
		char name[64];
		snprintf(name, sizeof name, "sbx-%d-%u", (int)getpid(),
		         __atomic_add_fetch(&seq, 1, __ATOMIC_RELAXED));
		int rc = sbx__cg_create(&sb->cg_caps, name, &sb->plan.cg, &run->cg, err);
		if (rc < 0) {
			sbx__strv_free(&wrapped);
			sbx__fds_close(&pass);
			return rc;
		}
	}

	int out[2][2] = { { -1, -1 }, { -1, -1 } };
	int in[2] = { -1, -1 };
	int status[2] = { -1, -1 };
	int rc = make_pipe(out[0], 0);
	if (rc == 0)
		rc = make_pipe(out[1], 0);
	if (rc == 0 && run->stdin_data)
		rc = make_pipe(in, 1);
	if (rc == 0 && be->status_fd)
		rc = make_pipe(status, 0);
	if (rc == 0) {
		run->ev_out[0] = event_new(sb->base, out[0][0], EV_READ | EV_PERSIST, on_stdout, run);
		run->ev_out[1] = event_new(sb->base, out[1][0], EV_READ | EV_PERSIST, on_stderr, run);
		if (run->stdin_data)
			run->ev_in = event_new(sb->base, in[1], EV_WRITE | EV_PERSIST, on_stdin, run);
		if (be->status_fd)
			run->ev_status = event_new(sb->base, status[0], EV_READ | EV_PERSIST, on_status, run);
		run->ev_exit = event_new(sb->base, -1, 0, on_exit_event, run);
		if (!run->ev_out[0] || !run->ev_out[1] || !run->ev_exit ||
		    (run->stdin_data && !run->ev_in) || (be->status_fd && !run->ev_status))
			rc = -ENOMEM;
	}
	if (rc == 0) {
		/* Fewer wake-ups for programs that write a lot; refused when the
		 * user is over its pipe quota, which is harmless. */
		fcntl(out[0][0], F_SETPIPE_SZ, PIPE_CAPACITY);
		fcntl(out[1][0], F_SETPIPE_SZ, PIPE_CAPACITY);
	}

	/* The limits the kernel holds each process to; RLIMIT_NPROC counts the
	 * user's processes, so it goes on top of those already running. */
	struct sbx__rlimit rlimits[SBX__ARRAY_LEN(sb->plan.rlimits) + 1];
	size_t nrl = sb->plan.nrlimits;
	memcpy(rlimits, sb->plan.rlimits, nrl * sizeof *rlimits);
	if (sb->plan.nproc) {
		unsigned long long n = (unsigned long long)sbx__user_tasks(getuid()) + sb->plan.nproc;
		rlimits[nrl++] = (struct sbx__rlimit){ RLIMIT_NPROC, n, n };
	}

	struct sbx__spawn sp = {
		.file = be->wrap ? wrapped.v[0] : program,
		.argv = be->wrap ? wrapped.v : run->argv.v,
		/* A wrapper (bwrap) runs outside the sandbox: the command's
		 * environment (LD_PRELOAD, say) must not reach it.  It travels
		 * in the wrapper's arguments instead. */
		.envp = be->wrap ? (char *const *)wrapper_env : run->env.v,
		.cwd = run->cwd,
		.fds = { run->stdin_data ? in[0] : sb->devnull, out[0][1], out[1][1] },
		.status_fd = status[1],
		.no_new_privs = be->isolated,
		.cg = &run->cg,
		.rlimits = rlimits,
		.nrlimits = nrl,
		.pass_fds = pass.v,
		.npass = pass.n,
	};
	struct sbx__spawned child = { .pidfd = -1 };
	if (rc == 0)
		rc = sbx__spawn(&sp, &child);
	sbx__strv_free(&wrapped);
	sbx__fds_close(&pass);

	/* The child's ends are the child's now (or nobody's). */
	close_fd(&out[0][1]);
	close_fd(&out[1][1]);
	close_fd(&in[0]);
	close_fd(&status[1]);
	run->fd_out[0] = out[0][0];
	run->fd_out[1] = out[1][0];
	run->fd_in = in[1];
	run->fd_status = status[0];

	if (rc == 0 && child.failed_stage == SBX__STAGE_NONE &&
	    event_assign(run->ev_exit, sb->base, child.pidfd,
	                 child.pidfd >= 0 ? EV_READ : EV_PERSIST, on_exit_event, run) < 0) {
		sbx__kill_tree(child.pid, child.pidfd);
		while (waitpid(child.pid, NULL, 0) < 0 && errno == EINTR)
			;
		if (child.pidfd >= 0)
			close(child.pidfd);
		rc = -ENOMEM;
	}
	if (rc < 0) {
		close_output(run, 0);
		close_output(run, 1);
		close_stdin(run);
		close_status(run);
		drop_event(&run->ev_exit);
		sbx__cg_destroy(&run->cg);
		return sbx__error(err, rc, "could not start '%s': %s", run->argv.v[0], sbx_strerror(rc));
	}

	sbx__sandbox_spawned(sb);
	if (child.failed_stage != SBX__STAGE_NONE) {
		start_failed(run, child.failed_stage, child.failed_errno);
		return 0;
	}

	run->pid = child.pid;
	run->pidfd = child.pidfd;
	run->state = SBX__RUN_RUNNING;
	if (sb->plan.watchdog_memory) {
		if (!sb->watchdog)
			sb->watchdog = sbx__watchdog_new(sb->base, 0);
		if (sb->watchdog)
			run->wd = sbx__watchdog_add(sb->watchdog, run->pid, sb->plan.watchdog_memory,
			                            on_watchdog, run);
		if (!run->wd)
			result_warn(run->res, "the memory watchdog could not watch this run (out of memory)");
	}
	static const struct timeval exit_poll = { 0, EXIT_POLL_US };
	event_add(run->ev_exit, run->pidfd >= 0 ? NULL : &exit_poll);
	event_add(run->ev_out[0], NULL);
	event_add(run->ev_out[1], NULL);
	if (run->ev_status)
		event_add(run->ev_status, NULL);
	if (run->ev_in) {
		if (run->stdin_len == 0)
			close_stdin(run);
		else
			event_add(run->ev_in, NULL);
	}
	if (run->timeout > 0) {
		struct timeval tv;
		tv.tv_sec = (time_t)run->timeout;
		tv.tv_usec = (suseconds_t)((run->timeout - (double)tv.tv_sec) * 1e6);
		event_add(run->ev_timer, &tv);
	}
	return 0;
}

/* ------------------------------------------------------------- transitions */

/* Kills the whole tree; the run ends when the pidfd reports the exit. */
static void kill_tree(sbx_run *run)
{
	if (!run->killed) {
		run->killed = true;
		/* The sandbox's first process first: its death ends the whole PID
		 * namespace at once. */
		if (run->inner_pidfd >= 0)
			syscall(SYS_pidfd_send_signal, run->inner_pidfd, SIGKILL, NULL, 0);
		sbx__kill_tree(run->pid, run->pidfd);
		/* The cgroup holds whatever escaped the walk (a process that
		 * detached and lost its parent). */
		if (run->cg.version != SBX__CG_NONE)
			sbx__cg_kill(&run->cg);
	}
}

/* Reaps the exited child: step 2 and 3 of the order at the top. */
static void reap(sbx_run *run)
{
	sbx_result *r = run->res;
	/* The group id is pinned only while our zombie is: a host that reaps
	 * children it did not start may have freed it already. */
	siginfo_t zombie;
	memset(&zombie, 0, sizeof zombie);
	if (waitid(P_PID, (id_t)run->pid, &zombie, WEXITED | WNOHANG | WNOWAIT) == 0 &&
	    zombie.si_pid == run->pid)
		kill(-run->pid, SIGKILL);
	if (run->cg.version != SBX__CG_NONE)
		sbx__cg_kill(&run->cg);
	if (run->wd) {
		int64_t peak = sbx__watchdog_peak(run->wd);
		sbx__watchdog_remove(run->sb->watchdog, run->wd);
		run->wd = NULL;
		if (peak >= 0) {
			r->resources.peak_memory_bytes = peak;
			r->resources.peak_memory_source = "sampled";
		}
	}
	int status = 0;
	struct rusage ru;
	memset(&ru, 0, sizeof ru);
	pid_t got;
	do
		got = wait4(run->pid, &status, 0, &ru);
	while (got < 0 && errno == EINTR);
	r->resources.wall_seconds = sbx__seconds_since(&run->t0);
	if (got == run->pid) {
		if (run->fd_status >= 0 && read_status(run))
			close_status(run);
		if (!run->sb->backend->status_fd) {
			if (WIFEXITED(status)) {
				r->exited = true;
				r->exit_code = WEXITSTATUS(status);
			} else if (WIFSIGNALED(status)) {
				r->signal = WTERMSIG(status);
			}
		} else if (run->inner_exit >= 0) {
			/* The backend passes a signal on as 128+N, as a shell does;
			 * an exit status above 128 reads the same way. */
			if (run->inner_exit > 128 && run->inner_exit - 128 < _NSIG) {
				r->signal = run->inner_exit - 128;
			} else {
				r->exited = true;
				r->exit_code = run->inner_exit;
			}
		} else if (run->killed || WIFSIGNALED(status)) {
			r->signal = WIFSIGNALED(status) ? WTERMSIG(status) : SIGKILL;
		} else {
			run->setup_failed = true;
		}
		r->resources.cpu_user_seconds = (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6;
		r->resources.cpu_system_seconds = (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
		if (!r->resources.peak_memory_source) {
			r->resources.peak_memory_bytes = (int64_t)ru.ru_maxrss * 1024;
			r->resources.peak_memory_source = "rusage";
		}
	} else {
		/* Someone else reaped our child (a host with SIGCHLD set to
		 * SIG_IGN, or one calling waitpid(-1)): its status is lost. */
		result_error(r, "the process's exit status was lost: another part of this program reaped it");
	}
	drop_event(&run->ev_exit);
	close_fd(&run->pidfd);
	run->pid = 0;
}

/*
 * What the limits did to the run: the cgroup's counters (and its figures,
 * which cover the whole tree), and the signals that the kernel sends for
 * the rlimits.  Then the cgroup goes.
 */
static void verdicts(sbx_run *run)
{
	sbx_result *r = run->res;
	sbx_resources *res = &r->resources;
	const struct sbx__plan *plan = &run->sb->plan;
	if (run->cg.version != SBX__CG_NONE) {
		struct sbx__cg_stats st;
		if (sbx__cg_stats(&run->cg, &st) == 0) {
			if (st.peak_memory >= 0) {
				res->peak_memory_bytes = st.peak_memory;
				res->peak_memory_source = run->cg.version == SBX__CG_V2 ? "cgroup_v2" : "cgroup_v1";
			}
			if (st.cpu_user >= 0) {
				res->cpu_user_seconds = st.cpu_user;
				res->cpu_system_seconds = st.cpu_system;
			}
			if (st.oom_killed)
				res->limits_hit |= 1u << SBX_HIT_MEMORY;
			if (st.pids_max)
				res->limits_hit |= 1u << SBX_HIT_PROCESSES;
		}
		sbx__cg_destroy(&run->cg);
	}
	if (run->hit_memory)
		res->limits_hit |= 1u << SBX_HIT_MEMORY;
	/* The rlimits end a process with a signal, which reaches us as the
	 * command's own or, when the command is a shell string that ran the
	 * process, as the shell's exit status 128+N (only then: a program's own
	 * exit status is its business). */
	int sig = r->signal;
	if (!sig && run->shell && r->exited && r->exit_code > 128)
		sig = r->exit_code - 128;
	if (sig == SIGXFSZ && plan->mech[SBX_LIMIT_FILE_SIZE] == SBX_MECH_RLIMIT)
		res->limits_hit |= 1u << SBX_HIT_FILE_SIZE;
	/* RLIMIT_CPU: SIGXCPU at the soft limit, SIGKILL at the hard one for a
	 * process that ignored the first; a SIGKILL that neither we nor a
	 * cgroup's OOM killer sent is that one. */
	if (run->sb->policy->cpu_seconds &&
	    (sig == SIGXCPU || (sig == SIGKILL && !run->killed &&
	                        !(res->limits_hit & (1u << SBX_HIT_MEMORY)))))
		res->limits_hit |= 1u << SBX_HIT_CPU;
	/* bwrap does not wait for its namespace's init, so without a cgroup
	 * the figures wait4() gives are bwrap's alone: the peak is unknown
	 * then (sbx.h says so of the cpu times). */
	if (run->sb->backend->status_fd && run->cg.version == SBX__CG_NONE &&
	    res->peak_memory_source && strcmp(res->peak_memory_source, "rusage") == 0) {
		res->peak_memory_bytes = -1;
		res->peak_memory_source = NULL;
	}
}

/* Releases everything and calls back; the run is gone afterwards. */
static void finish(sbx_run *run)
{
	sbx_sandbox *sb = run->sb;
	sbx_result *r = run->res;
	run->state = SBX__RUN_DONE;
	close_output(run, 0);
	close_output(run, 1);
	close_stdin(run);
	close_status(run);
	drop_event(&run->ev_exit);
	close_fd(&run->pidfd);
	close_fd(&run->inner_pidfd);
	if (run->wd) {
		sbx__watchdog_remove(sb->watchdog, run->wd);
		run->wd = NULL;
	}

	for (int s = 0; s < 2; s++) {
		sbx_output *o = &r->out[s];
		if (!o->data)
			o->data = calloc(1, 1);
		else
			o->data[o->len] = '\0';
		o->truncated = o->total > o->len;
		if (o->truncated)
			r->resources.limits_hit |= 1u << SBX_HIT_OUTPUT;
	}
	verdicts(run);
	if (run->setup_failed) {
		/* What the backend said is on the command's stderr. */
		const sbx_output *e = &r->out[SBX_STDERR];
		int len = (int)(e->len > 1024 ? 1024 : e->len);
		while (len > 0 && (e->data[len - 1] == '\n' || e->data[len - 1] == ' '))
			len--;
		result_error(r, "the %s sandbox could not be set up: %.*s", sb->backend->name, len,
		             len ? e->data : "it exited without a word");
	}
	for (size_t i = 0; i < sb->warnings.n; i++)
		result_warn(r, sb->warnings.v[i]);

	sbx__sandbox_unlink(sb, run);
	sbx_run_cb cb = run->cb;
	void *arg = run->cb_arg;
	struct event_base *outer = sbx__callback_base;
	sbx__callback_base = sb->base;
	run->res = NULL;
	run_free(run);
	cb(r, arg);
	sbx__callback_base = outer;
}

static void run_step(sbx_run *run, enum run_event ev)
{
	switch (run->state) {
	case SBX__RUN_QUEUED:
		switch (ev) {
		case RUN_START: {
			sbx_error err;
			int rc = sbx__run_spawn(run, &err);
			if (rc < 0) {
				result_error(run->res, "%s", err.message);
				run->res->start_errno = rc > -4096 ? -rc : 0;
				run->state = SBX__RUN_DRAINING;
				finish_later(run);
			}
			return;
		}
		case RUN_CANCEL:
			run->res->cancelled = true;
			sbx__sandbox_dequeue(run->sb, run);
			run->state = SBX__RUN_DRAINING;
			finish_later(run);
			return;
		default:
			break;
		}
		break;

	case SBX__RUN_RUNNING:
		switch (ev) {
		case RUN_CHILD_EXIT:
			reap(run);
			run->state = SBX__RUN_DRAINING;
			if (run->fd_out[0] < 0 && run->fd_out[1] < 0) {
				finish(run);
			} else {
				struct timeval grace = { 0, (suseconds_t)(GRACE_SECONDS * 1e6) };
				event_add(run->ev_timer, &grace);
			}
			return;
		case RUN_TIMEOUT:
			run->res->timed_out = true;
			kill_tree(run);
			return;
		case RUN_CANCEL:
			run->res->cancelled = true;
			kill_tree(run);
			return;
		case RUN_OUT_EOF:
			return; /* the child may run on with its output closed */
		default:
			break;
		}
		break;

	case SBX__RUN_DRAINING:
		switch (ev) {
		case RUN_OUT_EOF:
			if (run->fd_out[0] < 0 && run->fd_out[1] < 0)
				finish(run);
			return;
		case RUN_TIMEOUT:
			/* The grace is over: take what is buffered, drop the rest. */
			for (int s = 0; s < 2; s++)
				if (run->fd_out[s] >= 0)
					drain(run, s, READS_PER_WAKEUP);
			finish(run);
			return;
		case RUN_CANCEL:
			/* The command has already ended (or never started) by itself:
			 * that is its result; cancelling only stops the drain. */
			finish_later(run);
			return;
		case RUN_FINISH:
			finish(run);
			return;
		default:
			break;
		}
		break;

	case SBX__RUN_DONE:
		return;
	}
	/* An event that cannot happen in this state: the machine is wrong. */
	result_error(run->res, "internal error: event %d in state %d", (int)ev, (int)run->state);
}

/* ------------------------------------------------------------------ public */

void sbx__run_admit(sbx_run *run)
{
	run_step(run, RUN_START);
}

void sbx_run_cancel(sbx_run *run)
{
	if (run && !run->res->cancelled && run->state != SBX__RUN_DONE)
		run_step(run, RUN_CANCEL);
}

int sbx_run_pid(const sbx_run *run)
{
	return run && run->state == SBX__RUN_RUNNING ? (int)run->pid : 0;
}

void sbx__run_abandon(sbx_run *run)
{
	sbx_result *r = run->res;
	/* A run that is draining has ended by itself already. */
	if (run->state != SBX__RUN_DRAINING)
		r->cancelled = true;
	if (run->state == SBX__RUN_QUEUED)
		sbx__sandbox_dequeue(run->sb, run);
	if (run->state == SBX__RUN_RUNNING) {
		kill_tree(run);
		/* SIGKILL is not instant (a process in uninterruptible sleep), but
		 * the caller is freeing the sandbox: wait, bounded. */
		if (sbx__wait_exit(run->pid, run->pidfd, ABANDON_WAIT_MS)) {
			reap(run);
		} else {
			result_error(r, "the process %d did not die within %d ms of SIGKILL and was left unreaped",
			             (int)run->pid, ABANDON_WAIT_MS);
		}
	}
	finish(run);
}
