/*
 * spawn.c -- start a child without copying the parent.
 *
 * A supervisor with thousands of runs in flight has a large address space,
 * and fork() would copy its page tables on every start (page faults cost
 * about 13 us each on our machines).  So the child is made with
 * clone(CLONE_VM | CLONE_VFORK): it borrows the parent's memory and a stack
 * carved out of the parent's frame, and the parent sleeps until the child
 * has called execve() or died.  That is how posix_spawn() works inside
 * glibc and musl; we do it ourselves because posix_spawn() cannot set the
 * parent-death signal or resource limits, or tell us which step failed.
 *
 * Rules for the child, because it shares the parent's memory:
 *   - no allocation, no locks, no stdio: only system calls on data the parent
 *     prepared, and stack variables;
 *   - no signal handler may run in it: the parent blocks every signal around
 *     clone(), and the child resets every disposition to the default before
 *     it unblocks them (its handler table is its own: no CLONE_SIGHAND);
 *   - a failure is written to a close-on-exec pipe as (stage, errno) and the
 *     child exits 127; a successful execve() closes the pipe, so the parent
 *     reads either a report or end-of-file, and "could not start" never
 *     travels as an exit status.
 *
 * Under valgrind, CLONE_VM | CLONE_VFORK is turned into a plain fork; the
 * code relies on nothing but the pipe, so it works either way.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "internal.h"

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

/* Big enough for the child's few small frames, with room to spare. */
#define CHILD_STACK_SIZE (32 * 1024)

struct child_report {
	int stage;
	int err;
};

struct child {
	const struct sbx__spawn *sp;
	int report_fd;
	pid_t parent;
	/* Written by the child in the parent's own memory (CLONE_VM); the
	 * parent resumes only once the child has exec'd or exited (CLONE_VFORK),
	 * so it reads them with no wait.  |started| stays 0 where the memory
	 * was not shared after all (valgrind runs the clone as a fork): then
	 * the report pipe says the same, at the cost of waiting for its EOF. */
	volatile int started;
	volatile int failed_stage;
	volatile int failed_errno;
};

SBX__CHILD_CODE static void child_fail(struct child *c, enum sbx__stage stage, int err)
{
	c->failed_errno = err;
	c->failed_stage = (int)stage;
	struct child_report r = { .stage = (int)stage, .err = err };
	ssize_t n;
	do
		n = write(c->report_fd, &r, sizeof r);
	while (n < 0 && errno == EINTR);
	_exit(127);
}

/* Every fd from |first| up is closed at execve(); the report pipe already is. */
SBX__CHILD_CODE static int child_close_fds(int first)
{
	if (syscall(SYS_close_range, (unsigned)first, ~0U, CLOSE_RANGE_CLOEXEC) == 0)
		return 0;
	/* Kernels before 5.11: mark them one by one up to the fd limit. */
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
		return -1;
	long max = rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur > 1048576 ? 1048576 : (long)rl.rlim_cur;
	for (long fd = first; fd < max; fd++)
		fcntl((int)fd, F_SETFD, FD_CLOEXEC);
	return 0;
}

SBX__CHILD_CODE static int child_main(void *arg)
{
	struct child *c = arg;
	c->started = 1;
	const struct sbx__spawn *sp = c->sp;

	/* Dispositions first, while every signal is still blocked. */
	struct sigaction dfl;
	memset(&dfl, 0, sizeof dfl);
	dfl.sa_handler = SIG_DFL;
	for (int sig = 1; sig < _NSIG; sig++) {
		if (sig == SIGKILL || sig == SIGSTOP)
			continue;
		sigaction(sig, &dfl, NULL); /* fails harmlessly for glibc's reserved signals */
	}

	/* Its own session: no controlling terminal, and one group to kill. */
	if (setsid() < 0)
		child_fail(c, SBX__STAGE_SETUP, errno);
	/* Dies with the supervisor's thread, even if that is SIGKILLed; and if the
	 * parent is already gone, do not start at all. */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0)
		child_fail(c, SBX__STAGE_SETUP, errno);
	if (getppid() != c->parent)
		child_fail(c, SBX__STAGE_SETUP, ESRCH);

	for (int i = 0; i < 3; i++)
		if (dup2(sp->fds[i], i) < 0)
			child_fail(c, SBX__STAGE_SETUP, errno);
	/* Everything else closes at exec, except the copies made below: dup2()
	 * gives a copy without close-on-exec.  The passed fds' sources all lie
	 * above their targets (sbx__spawn saw to it), so none is overwritten
	 * before it is copied. */
	if (child_close_fds(3) < 0)
		child_fail(c, SBX__STAGE_SETUP, errno);
	if (sp->status_fd >= 0 && dup2(sp->status_fd, 3) < 0)
		child_fail(c, SBX__STAGE_SETUP, errno);
	for (size_t i = 0; i < sp->npass; i++)
		if (dup2(sp->pass_fds[i], SBX__PASS_FD_BASE + (int)i) < 0)
			child_fail(c, SBX__STAGE_SETUP, errno);
	/* No setuid or file capability may raise what the command can do. */
	if (sp->no_new_privs && prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		child_fail(c, SBX__STAGE_SETUP, errno);

	/* Into the run's cgroups before anything else runs, so that the
	 * whole tree is born inside them. */
	if (sp->cg && sp->cg->version != SBX__CG_NONE) {
		int e = sbx__cg_enter(sp->cg);
		if (e)
			child_fail(c, SBX__STAGE_SETUP, e);
	}
	for (size_t i = 0; i < sp->nrlimits; i++) {
		struct rlimit rl = { .rlim_cur = sp->rlimits[i].cur, .rlim_max = sp->rlimits[i].max };
		if (setrlimit(sp->rlimits[i].resource, &rl) < 0)
			child_fail(c, SBX__STAGE_SETUP, errno);
	}

	if (sp->cwd && chdir(sp->cwd) < 0)
		child_fail(c, SBX__STAGE_CWD, errno);

	sigset_t none;
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);

	execve(sp->file, sp->argv, sp->envp);
	child_fail(c, SBX__STAGE_EXEC, errno);
	return 127;
}

int sbx__fd_move_high(int *fd)
{
	if (*fd > 3)
		return 0;
	int moved = fcntl(*fd, F_DUPFD_CLOEXEC, 4);
	if (moved < 0)
		return -errno;
	close(*fd);
	*fd = moved;
	return 0;
}

/* Moves |fd| to |min| or above, close-on-exec, closing the old one; -errno. */
static int fd_move_above(int *fd, int min)
{
	if (*fd >= min)
		return 0;
	int moved = fcntl(*fd, F_DUPFD_CLOEXEC, min);
	if (moved < 0)
		return -errno;
	close(*fd);
	*fd = moved;
	return 0;
}

int sbx__fds_push(struct sbx__fds *f, int fd)
{
	if (f->n == f->cap) {
		size_t cap = f->cap ? f->cap * 2 : 8;
		int *v = realloc(f->v, cap * sizeof *v);
		if (!v) {
			close(fd);
			return -ENOMEM;
		}
		f->v = v;
		f->cap = cap;
	}
	f->v[f->n++] = fd;
	return 0;
}

void sbx__fds_close(struct sbx__fds *f)
{
	for (size_t i = 0; i < f->n; i++)
		close(f->v[i]);
	free(f->v);
	*f = (struct sbx__fds){0};
}

int sbx__spawn(const struct sbx__spawn *sp, struct sbx__spawned *out)
{
	/* The child copies passed fds to SBX__PASS_FD_BASE and up; what it
	 * still needs afterwards (the report pipe, the other passed fds) must
	 * lie above all of those. */
	int floor = SBX__PASS_FD_BASE + (int)sp->npass;
	for (size_t i = 0; i < sp->npass; i++) {
		int rc = fd_move_above(&sp->pass_fds[i], floor);
		if (rc < 0)
			return rc;
	}
	int report[2];
	if (pipe2(report, O_CLOEXEC) < 0)
		return -errno;
	int rc = fd_move_above(&report[0], floor);
	if (rc == 0)
		rc = fd_move_above(&report[1], floor);
	if (rc < 0) {
		close(report[0]);
		close(report[1]);
		return rc;
	}

	struct child c = { .sp = sp, .report_fd = report[1], .parent = getpid() };
	/* The child's stack lives in this frame, which is suspended until the
	 * child has exec'd or exited (CLONE_VFORK). */
	_Alignas(16) char stack[CHILD_STACK_SIZE];

	sigset_t all, saved;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &saved);
	pid_t pid = clone(child_main, stack + sizeof stack, CLONE_VM | CLONE_VFORK | SIGCHLD, &c);
	int clone_errno = errno;
	pthread_sigmask(SIG_SETMASK, &saved, NULL);
	close(report[1]);

	if (pid < 0) {
		close(report[0]);
		return -clone_errno;
	}

	struct child_report r = {0};
	ssize_t n = 0;
	if (c.started) {
		/* Back from vfork: the child has exec'd, or failed and exited.
		 * Not waiting for the pipe's end-of-file matters: it comes only
		 * after the new program has closed every fd it inherited, which
		 * with thousands of runs open is most of the cost of a start. */
		if (c.failed_stage != SBX__STAGE_NONE) {
			r = (struct child_report){ .stage = c.failed_stage, .err = c.failed_errno };
			n = (ssize_t)sizeof r;
		}
	} else {
		/* End-of-file means execve() succeeded; a report means it never ran. */
		do
			n = read(report[0], &r, sizeof r);
		while (n < 0 && errno == EINTR);
	}
	close(report[0]);

	*out = (struct sbx__spawned){ .pid = pid, .pidfd = -1 };
	if (n == (ssize_t)sizeof r) {
		while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
			;
		out->failed_stage = (enum sbx__stage)r.stage;
		out->failed_errno = r.err;
		return 0;
	}

	/* The child is ours and not yet reaped, so its pid cannot have been
	 * recycled: the pidfd refers to it for sure. */
	/* Kernels before 5.3, and valgrind, have no pidfds: the run then
	 * watches the child by polling instead (see run.c).  Asked once. */
	static int no_pidfd;
	if (__atomic_load_n(&no_pidfd, __ATOMIC_RELAXED))
		return 0;
	int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (pidfd < 0 && errno == ENOSYS) {
		__atomic_store_n(&no_pidfd, 1, __ATOMIC_RELAXED);
		return 0;
	}
	if (pidfd < 0 || sbx__fd_move_high(&pidfd) < 0) {
		int e = pidfd < 0 ? errno : EMFILE;
		if (pidfd >= 0)
			close(pidfd);
		kill(pid, SIGKILL);
		while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
			;
		return -e;
	}
	out->pidfd = pidfd;
	return 0;
}
