/*
 * internal.h -- what the parts of libsbx share and nobody else sees.
 *
 * Internal symbols that cross files start with sbx__ and stay hidden: the
 * library is built with -fvisibility=hidden and only SBX_API is exported.
 */
#ifndef SBX_INTERNAL_H
#define SBX_INTERNAL_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>
#include <time.h>

#include "sbx.h"
#include "cgroup.h"

struct event;
struct event_base;
struct rusage;

#define SBX__ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/*
 * Code that runs in the vfork child: on a stack carved out of the parent's
 * frame, which AddressSanitizer takes for an overflow of that frame's array;
 * such code is left uninstrumented (it only makes system calls).
 */
#if defined(__has_attribute)
#if __has_attribute(no_sanitize)
#define SBX__CHILD_CODE __attribute__((no_sanitize("address")))
#endif
#endif
#ifndef SBX__CHILD_CODE
#define SBX__CHILD_CODE
#endif

/* Where cgroups are mounted. */
#define SBX__CGROUP_ROOT "/sys/fs/cgroup"

/* ------------------------------------------------------------ errors */

/* Fills |err| (may be NULL) with a formatted sentence and returns |code|. */
int sbx__error(sbx_error *err, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* ------------------------------------------------- growable string list */

/* A NULL-terminated array of owned strings; {0} is an empty list. */
typedef struct sbx__strv {
	char **v;
	size_t n;
} sbx__strv;

int sbx__strv_push(sbx__strv *sv, const char *s);      /* copies s; -ENOMEM */
int sbx__strv_copy(sbx__strv *dst, const sbx__strv *src);
void sbx__strv_free(sbx__strv *sv);

/* ------------------------------------------------------------ policy */

struct sbx_policy {
	sbx__strv writable;
	sbx__strv deny_write;
	sbx__strv deny_read;
	sbx__strv env_allow;      /* names of the caller's variables let through */
	sbx__strv env_set;        /* "NAME=VALUE" */
	enum sbx_network network;
	bool protect_defaults;
	bool core_dumps;
	enum sbx_memory_strategy memory_strategy;
	/* Limits; 0 means not asked for. */
	uint64_t memory;
	double cpus;
	uint64_t cpu_seconds;
	uint64_t processes;
	uint64_t file_size;
	uint64_t open_files;
};

int sbx__policy_copy(sbx_policy **out, const sbx_policy *src);
/* Whether the policy asks for limit |l| (core dumps are always decided). */
bool sbx__policy_wants(const sbx_policy *p, enum sbx_limit l);

/*
 * Builds the environment of a run: the caller's allowed variables, then the
 * policy's, then |extra| ("NAME=VALUE"); a later one replaces an earlier one
 * of the same name, and PATH gets a default when nobody set it.
 */
int sbx__env_build(const sbx_policy *p, const char *const *extra, sbx__strv *out);

/* ------------------------------------------------------------ commands */

/* Checks the command part of |o|: argv or shell, cwd, env entries. */
int sbx__command_check(const sbx_run_options *o, sbx_error *err);
/* Builds argv (a shell string through /bin/sh -c), the environment and cwd. */
int sbx__command_build(const sbx_policy *p, const sbx_run_options *o, sbx__strv *argv,
                       sbx__strv *env, char **cwd);
/*
 * Finds |file| the way execvp() would, on the host: inside every backend's
 * sandbox the host's paths are where they are outside, so a missing program
 * is told apart from a sandbox that could not be set up.  Fills |out| and
 * returns 0, or the errno exec would have given (ENOENT, EACCES).
 */
int sbx__resolve_program(const char *file, const sbx__strv *env, const char *cwd, char *out,
                         size_t size);

/* ------------------------------------------------------------- spawn */

/* Where a child failed before its program ran. */
enum sbx__stage {
	SBX__STAGE_NONE = 0,
	SBX__STAGE_SETUP, /* session, fds, signals, limits */
	SBX__STAGE_CWD,   /* chdir */
	SBX__STAGE_EXEC,  /* execve, after the PATH search */
};

struct sbx__rlimit {
	int resource;
	unsigned long long cur, max;
};

/* Everything the child needs, prepared by the parent: the child may not allocate. */
struct sbx__spawn {
	const char *file;            /* the program to execute: a path */
	char *const *argv;
	char *const *envp;
	const char *cwd;             /* NULL: stay */
	int fds[3];                  /* become 0, 1, 2; all must be >= 4 */
	int status_fd;               /* becomes 3 when >= 0; must be >= 4 */
	bool no_new_privs;
	const struct sbx__cg *cg;    /* joined before exec; NULL or version NONE: none */
	const struct sbx__rlimit *rlimits;
	size_t nrlimits;
	/* More fds for the child: pass_fds[i] becomes SBX__PASS_FD_BASE + i.
	 * sbx__spawn may renumber them (in place) to keep them clear of those. */
	int *pass_fds;
	size_t npass;
};

/* What sbx__spawn() saw of the child. */
struct sbx__spawned {
	pid_t pid;
	int pidfd;
	enum sbx__stage failed_stage; /* SBX__STAGE_NONE when the program runs */
	int failed_errno;
};

/*
 * Starts the child with a vfork-style clone and returns once it has exec'd or
 * failed.  0: *out describes it (a child that failed before exec is already
 * reaped, and pidfd is -1).  Negative: nothing was started and nothing leaks.
 */
int sbx__spawn(const struct sbx__spawn *sp, struct sbx__spawned *out);

/* Moves |fd| to a number >= 4 (clear of stdio and the child's fd 3),
 * close-on-exec, closing the old one; -errno. */
int sbx__fd_move_high(int *fd);

/* The child's first passed fd (after stdio and the status fd 3). */
#define SBX__PASS_FD_BASE 4

/* A list of owned fds to pass to a child. */
struct sbx__fds {
	int *v;
	size_t n, cap;
};

/* Appends |fd| (taking it: it is closed if the list cannot grow); -ENOMEM. */
int sbx__fds_push(struct sbx__fds *f, int fd);
/* Closes every fd and frees the list. */
void sbx__fds_close(struct sbx__fds *f);

/* ------------------------------------------------------------- processes */

/*
 * Kills |pid| and every descendant it can find through /proc, freezing them
 * with SIGSTOP first so none can fork away while the tree is walked, and
 * then kills the process group |pid| leads.  |pidfd| signals the root
 * without any chance of hitting a recycled pid.
 */
void sbx__kill_tree(pid_t pid, int pidfd);
/* For tests: walk by scanning /proc, as on kernels without children files. */
extern bool sbx__proc_scan_only;

/* The parent of |pid| as /proc says, or -1. */
pid_t sbx__parent_of(pid_t pid);
/* How many tasks (threads included) run as real user |uid|, from /proc. */
long sbx__user_tasks(uid_t uid);
/* Whether our child |pid| has exited, without reaping it. */
bool sbx__exited(pid_t pid);
/* Waits up to |timeout_ms| for our child to exit (pidfd may be -1); 1 if it did. */
int sbx__wait_exit(pid_t pid, int pidfd, int timeout_ms);

/* ------------------------------------------------------------- limits */

/* How a sandbox enforces its policy's limits (limits.c). */
struct sbx__plan {
	enum sbx_mechanism mech[SBX_LIMIT_COUNT];
	struct sbx__rlimit rlimits[8];  /* set in every child */
	size_t nrlimits;
	uint64_t nproc;                 /* RLIMIT_NPROC on top of the user's processes; 0: none */
	bool use_cgroup;                /* a cgroup per run, with these limits: */
	struct sbx__cg_limits cg;
	uint64_t watchdog_memory;       /* bytes; 0: no watchdog */
};

/* Decides |plan| and appends a warning for every limit enforced more weakly
 * than asked, or not at all. */
int sbx__limits_plan(const sbx_policy *p, const struct sbx__cg_caps *caps,
                     unsigned own_processes, struct sbx__plan *plan, sbx__strv *warnings);

/* ------------------------------------------------------------- backend */

#include "backend.h"

/* ------------------------------------------------------------- sandbox */

struct sbx_sandbox {
	struct event_base *base;
	sbx_policy *policy;
	const struct sbx__backend *backend;
	void *backend_state;      /* the backend's own, from its open() */
	sbx_sandbox_options opts;
	/* Runs in flight (started or queued), so freeing can end them. */
	struct sbx_run *runs;
	/* Runs waiting for a start slot, oldest first. */
	struct sbx_run *queue_head, *queue_tail;
	unsigned nstarting;       /* spawns this loop turn (see sandbox.c) */
	struct event *ev_admit;   /* lets queued runs start on the next turn */
	int devnull;              /* read-only /dev/null, for stdin */
	char *scratch;            /* every read of output lands here first */
	bool closing;             /* sbx_sandbox_free() is running */
	/* How the limits are enforced, and what every result warns of. */
	struct sbx__plan plan;
	struct sbx__cg_caps cg_caps;
	struct sbx__watchdog *watchdog; /* made at the first run that needs it */
	sbx__strv warnings;
};

/* Matches PIPE_CAPACITY in run.c: one read can empty a full pipe. */
#define SBX__SCRATCH_SIZE (256 * 1024)

/* The in-flight list and the start queue. */
void sbx__sandbox_link(sbx_sandbox *sb, sbx_run *run);
void sbx__sandbox_unlink(sbx_sandbox *sb, sbx_run *run);
void sbx__sandbox_enqueue(sbx_sandbox *sb, sbx_run *run);
void sbx__sandbox_dequeue(sbx_sandbox *sb, sbx_run *run);
/* Whether a run may spawn now rather than wait in the queue. */
bool sbx__sandbox_may_spawn(const sbx_sandbox *sb);
/* Counts a spawn against this loop turn's start slots. */
void sbx__sandbox_spawned(sbx_sandbox *sb);

/* ----------------------------------------------------------------- run */

/*
 * A run's life, decided in one place (run.c, run_step()):
 *
 *   QUEUED --spawn--> RUNNING --child exits, reaped--> DRAINING --EOF/grace--> DONE
 *     |                 |  (timeout, cancel: kill the tree, keep RUNNING)       ^
 *     +---cancel/spawn failure/could not start----------------------------------+
 */
enum sbx__run_state {
	SBX__RUN_QUEUED,
	SBX__RUN_RUNNING,
	SBX__RUN_DRAINING,
	SBX__RUN_DONE,
};

struct sbx_run {
	sbx_sandbox *sb;
	sbx_run *prev, *next;        /* the sandbox's in-flight list */
	sbx_run *queue_next;         /* the sandbox's start queue */
	enum sbx__run_state state;
	bool killed;                 /* the tree was killed (timeout or cancel) */
	bool finish_pending;         /* ev_timer was activated to finish */

	/* What to run, owned until the run ends. */
	sbx__strv argv;
	sbx__strv env;
	char *cwd;
	char *stdin_data;
	size_t stdin_len, stdin_off;
	double timeout;
	size_t max_output;
	size_t cap[2];               /* allocated size of res->out[i].data */
	sbx_output_cb on_output;
	void *on_output_arg;
	sbx_run_cb cb;
	void *cb_arg;

	/* The child and our ends of its pipes; -1 when closed. */
	pid_t pid;
	int pidfd;
	int fd_out[2];
	int fd_in;
	/* The backend's report (backend.h): our end of fd 3, what came so far,
	 * the sandbox's first process, and the command's exit code (-1: none). */
	int fd_status;
	struct event *ev_status;
	char status_buf[256];
	size_t status_len;
	pid_t inner_pid;
	int inner_pidfd;
	int inner_exit;
	bool setup_failed;           /* the backend exited without running the command */
	bool hit_memory;             /* the watchdog found the tree over its limit */
	bool shell;                  /* the command is a shell string */
	struct sbx__cg cg;           /* the run's cgroups, when the plan has them */
	struct sbx__wd_entry *wd;    /* the watchdog's entry, when the plan has one */
	/* ev_exit watches the pidfd, or without pidfds polls the child. */
	struct event *ev_exit, *ev_out[2], *ev_in, *ev_timer;
	struct timespec t0;

	sbx_result *res;
};

/* The loop whose run callback this thread is inside, or NULL: a blocking
 * call cannot wait on that loop from there.  (libevent 2.1's own
 * event_base_get_running_event() crashes when called outside the loop.) */
extern __thread struct event_base *sbx__callback_base;

/* Spawns the run's child; 0, or a negative code with nothing left behind. */
int sbx__run_spawn(sbx_run *run, sbx_error *err);
/* Starts a queued run now (the sandbox has a free slot). */
void sbx__run_admit(sbx_run *run);
/* Ends a run because its sandbox is being freed: kill, reap, call back. */
void sbx__run_abandon(sbx_run *run);

/* ------------------------------------------------------------- cleanup */

/* The lock a live session holds inside its directory. */
#define SBX__SESSION_LOCK ".lock"

/*
 * Removes |path| and everything under it, without following links or
 * entering other mounts, whatever the modes.  0 when it is gone (or never
 * was); else a negative code and a message naming what stayed.
 */
int sbx__remove_tree(const char *path, sbx_error *err);

/* Removes the "sbx-PID-XXXXXX" directories in |tmpdir| whose session is
 * gone; returns how many. */
unsigned sbx__reclaim_sessions(const char *tmpdir);

/* ---------------------------------------------------------------- time */

double sbx__seconds_since(const struct timespec *t0);

#endif /* SBX_INTERNAL_H */
