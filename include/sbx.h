/*
 * sbx.h -- run untrusted commands in an operating-system sandbox, many at
 * once, on the caller's libevent loop.
 *
 * The model, in the order a caller meets it:
 *
 *   sbx_policy   what a run may do: writable and denied paths, network,
 *                environment, limits.  Plain data; validated as it is set.
 *   sbx_sandbox  a policy copied and bound to an event_base and a backend.
 *   sbx_run      one command in flight on that loop.  Its callback fires
 *                exactly once, with an sbx_result the callback then owns.
 *   sbx_session  what most callers hold: a sandbox with a workspace and a
 *                scratch directory around it, and a clean end.
 *
 * Errors: every call that can fail returns 0 or a negative code
 * (sbx_strerror() names it) and, when given an sbx_error, fills it with a
 * sentence that names the bad value or the missing tool.  The library never
 * exits, aborts or prints; it never installs a SIGCHLD handler and only ever
 * reaps the children it started itself, each by its own pid.
 *
 * Threads: a sandbox, its runs and its results belong to the thread that
 * runs its event_base.  Separate sandboxes on separate loops may be used from
 * separate threads.
 */
#ifndef SBX_H
#define SBX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(SBX_BUILDING) && defined(__GNUC__)
#define SBX_API __attribute__((visibility("default")))
#else
#define SBX_API
#endif

struct event_base;

/* ------------------------------------------------------------------ errors */

/*
 * Error codes are negative.  Codes from -1 to -4095 are negated errno values
 * (-ENOMEM, -EINVAL, -EMFILE, ...); the ones below are sbx's own.
 */
enum sbx_errcode {
	SBX_EUNAVAILABLE = -5001, /* the backend cannot run on this machine */
	SBX_ENOISOLATION = -5002, /* isolation was required but is not possible */
	SBX_ECLOSED = -5003,      /* the sandbox is being freed */
	SBX_ESTATE = -5004,       /* the call does not fit the object's state */
	SBX_EFAILED = -5005,      /* a checked command did not succeed (sbx_session_run) */
};

/* A sentence long enough for a path of PATH_MAX and its explanation. */
#define SBX_ERROR_MAX 4352

typedef struct sbx_error {
	int code;                    /* the same negative code the call returned */
	char message[SBX_ERROR_MAX]; /* one sentence, NUL-terminated */
} sbx_error;

/* The name of a code: "invalid argument", "backend unavailable", ...  Never NULL. */
SBX_API const char *sbx_strerror(int code);

/* --------------------------------------------------------------- sizes */

/*
 * Parses "512M", "1.5G", "65536", "1K" into bytes.  K, M, G and T (either
 * case, optionally followed by "B" or "iB") are powers of 1024.  Zero,
 * negative, fractional-byte, overflowing and malformed values are refused
 * with the text quoted in the error; |what| names the option in that message.
 */
SBX_API int sbx_parse_size(const char *text, const char *what, uint64_t *out,
                           sbx_error *err);

/* -------------------------------------------------------------- policy */

typedef struct sbx_policy sbx_policy;

enum sbx_network { SBX_NETWORK_NONE = 0, SBX_NETWORK_FULL = 1 };

enum sbx_memory_strategy {
	SBX_MEMORY_AUTO = 0, /* cgroup, then rlimit, then the watchdog */
	SBX_MEMORY_KERNEL,   /* a kernel limit, or a warning */
	SBX_MEMORY_WATCHDOG, /* only the sampling watchdog */
	SBX_MEMORY_NONE,     /* enforce nothing, and say so */
};

/* The limits a policy can ask for; also bit positions in sbx_result.limits_hit. */
enum sbx_limit {
	SBX_LIMIT_MEMORY = 0,
	SBX_LIMIT_CPUS,
	SBX_LIMIT_CPU_SECONDS,
	SBX_LIMIT_PROCESSES,
	SBX_LIMIT_FILE_SIZE,
	SBX_LIMIT_OPEN_FILES,
	SBX_LIMIT_CORE_DUMPS,
	SBX_LIMIT_COUNT
};

/* How a limit was (or would be) enforced. */
enum sbx_mechanism {
	SBX_MECH_UNSET = 0, /* not asked for */
	SBX_MECH_NONE,      /* asked for, not enforced: a warning says why */
	SBX_MECH_RLIMIT,
	SBX_MECH_WATCHDOG,
	SBX_MECH_CGROUP_V1,
	SBX_MECH_CGROUP_V2,
};

/* A new empty policy: nothing writable, network none, protected defaults on,
 * the default environment allowlist, no limits.  NULL when out of memory. */
SBX_API sbx_policy *sbx_policy_new(void);
/* Frees |p| and everything it copied.  NULL is ignored. */
SBX_API void sbx_policy_free(sbx_policy *p);

/*
 * Paths: absolute (a leading "~/" is expanded from $HOME), not empty, no NUL,
 * at most PATH_MAX bytes; each call copies |path|.  A denied path need not
 * exist.  The error quotes the refused value.
 */
SBX_API int sbx_policy_add_writable(sbx_policy *p, const char *path, sbx_error *err);
SBX_API int sbx_policy_add_deny_write(sbx_policy *p, const char *path, sbx_error *err);
SBX_API int sbx_policy_add_deny_read(sbx_policy *p, const char *path, sbx_error *err);
SBX_API int sbx_policy_set_network(sbx_policy *p, enum sbx_network mode, sbx_error *err);
SBX_API int sbx_policy_set_protect_defaults(sbx_policy *p, bool on);

/* Lets the caller's variable |name| through to runs (copies |name|). */
SBX_API int sbx_policy_allow_env(sbx_policy *p, const char *name, sbx_error *err);
/* Sets "NAME=VALUE" for every run (copies it); a later call for the same name wins. */
SBX_API int sbx_policy_set_env(sbx_policy *p, const char *name_value, sbx_error *err);

/*
 * Limits.  Each refuses zero and out-of-range values with the value in the
 * message.  cpus is a share of cores (0.5 is half of one core).
 */
SBX_API int sbx_policy_set_memory(sbx_policy *p, uint64_t bytes, sbx_error *err);
SBX_API int sbx_policy_set_cpus(sbx_policy *p, double cores, sbx_error *err);
SBX_API int sbx_policy_set_cpu_seconds(sbx_policy *p, uint64_t seconds, sbx_error *err);
SBX_API int sbx_policy_set_processes(sbx_policy *p, uint64_t count, sbx_error *err);
SBX_API int sbx_policy_set_file_size(sbx_policy *p, uint64_t bytes, sbx_error *err);
SBX_API int sbx_policy_set_open_files(sbx_policy *p, uint64_t count, sbx_error *err);
SBX_API int sbx_policy_set_core_dumps(sbx_policy *p, bool allowed);
SBX_API int sbx_policy_set_memory_strategy(sbx_policy *p, enum sbx_memory_strategy s,
                                           sbx_error *err);

/*
 * Narrowing, for servers that take a policy per request.  A copy starts from
 * a base policy; clearing the writable paths lets a request name fewer.
 * sbx_policy_check_narrows() returns 0 when |p| allows nothing that |base|
 * does not: writable paths inside the base's, every denied path of the base,
 * no variable the base does not let through, network none under none,
 * protected defaults and core dumps no looser, each limit set and no higher,
 * the same memory strategy.  Otherwise -EPERM, with a message
 * that starts with the field ("writable: ...", "memory: ...").
 */
SBX_API sbx_policy *sbx_policy_copy(const sbx_policy *p);   /* NULL when out of memory */
SBX_API void sbx_policy_clear_writable(sbx_policy *p);
SBX_API int sbx_policy_check_narrows(const sbx_policy *base, const sbx_policy *p,
                                     sbx_error *err);

/* ------------------------------------------------------------- sandbox */

typedef struct sbx_sandbox sbx_sandbox;

enum sbx_backend {
	SBX_BACKEND_AUTO = 0,        /* the strongest that can run here; never passthrough on Linux */
	SBX_BACKEND_PASSTHROUGH,     /* no isolation, and every result says so */
	SBX_BACKEND_BWRAP,           /* bubblewrap: $SBX_BWRAP, else "bwrap" from $PATH */
	SBX_BACKEND_NATIVE,
	SBX_BACKEND_LANDLOCK,
};

typedef struct sbx_sandbox_options {
	enum sbx_backend backend;  /* default SBX_BACKEND_AUTO */
	bool require_isolation;    /* refuse to run unisolated */
	unsigned max_starting;     /* runs being set up at once; the rest wait in order (default 32) */
} sbx_sandbox_options;

/* Fills |o| with the defaults. */
SBX_API void sbx_sandbox_options_init(sbx_sandbox_options *o);

/*
 * Makes a sandbox on |base| (borrowed: it must outlive the sandbox).  The
 * policy is copied; the caller may change or free its own at once.  |options|
 * may be NULL for the defaults.  On success *out is set; free it with
 * sbx_sandbox_free().
 */
SBX_API int sbx_sandbox_new(struct event_base *base, const sbx_policy *policy,
                            const sbx_sandbox_options *options, sbx_sandbox **out,
                            sbx_error *err);

/*
 * Frees |sb|.  Runs still in flight are killed and reaped before it returns,
 * and each callback fires once, with cancelled set (unless the command had
 * already ended by itself), from inside this call.
 * Starting a run from such a callback fails with SBX_ECLOSED.  NULL is ignored.
 */
SBX_API void sbx_sandbox_free(sbx_sandbox *sb);

/* The backend this sandbox uses ("passthrough", "bwrap", ...) and whether it isolates. */
SBX_API const char *sbx_sandbox_backend(const sbx_sandbox *sb);
SBX_API bool sbx_sandbox_isolated(const sbx_sandbox *sb);

/* ----------------------------------------------------------------- run */

typedef struct sbx_run sbx_run;

enum sbx_stream { SBX_STDOUT = 0, SBX_STDERR = 1 };

/*
 * Sees every chunk of output as it is read, kept or not (|data| is borrowed
 * for the call).  It must not free the sandbox; it may cancel the run.
 */
typedef void (*sbx_output_cb)(enum sbx_stream stream, const char *data, size_t len,
                              void *arg);

typedef struct sbx_run_options {
	const char *const *argv; /* program and arguments, NULL-terminated; or */
	const char *shell;       /* a command line for /bin/sh -c (exactly one of the two) */
	const char *cwd;         /* absolute; NULL runs in the caller's directory */
	const char *const *env;  /* extra "NAME=VALUE", NULL-terminated; override the policy's */
	const void *stdin_data;  /* bytes fed to stdin; NULL gives /dev/null */
	size_t stdin_len;
	double timeout;          /* wall-clock seconds; 0 for none (default 60) */
	size_t max_output;       /* bytes kept per stream (default 1 MiB); the rest is counted */
	sbx_output_cb on_output; /* optional: output as it arrives */
	void *on_output_arg;
} sbx_run_options;

/* Fills |o| with the defaults (timeout 60 s, 1 MiB per stream, stdin /dev/null). */
SBX_API void sbx_run_options_init(sbx_run_options *o);

typedef struct sbx_output {
	char *data;         /* the kept bytes, NUL-terminated for convenience */
	size_t len;         /* bytes kept (at most max_output) */
	uint64_t total;     /* bytes the program wrote, kept or not */
	bool truncated;     /* total > len */
} sbx_output;

#define SBX_MAX_WARNINGS 16

typedef struct sbx_resources {
	double wall_seconds;
	/*
	 * CPU time of the tree: from the run's cgroup when it has one, else
	 * from wait4(), which counts only the processes that were waited for.
	 * Under bwrap without a cgroup that is bwrap alone (close to zero), and
	 * the peak is unknown.
	 */
	double cpu_user_seconds;
	double cpu_system_seconds;
	int64_t peak_memory_bytes;            /* -1 when unknown */
	const char *peak_memory_source;       /* "rusage", "cgroup_v1", ...; NULL when unknown */
	enum sbx_mechanism mechanisms[SBX_LIMIT_COUNT];
	unsigned limits_hit;                  /* bits (1u << SBX_HIT_*) */
	char *warnings[SBX_MAX_WARNINGS];     /* what was asked for and not enforced */
	unsigned nwarnings;
} sbx_resources;

/* Bits of sbx_resources.limits_hit. */
enum sbx_hit {
	SBX_HIT_MEMORY = 0,
	SBX_HIT_CPU,
	SBX_HIT_PROCESSES,
	SBX_HIT_FILE_SIZE,
	SBX_HIT_OUTPUT,
	SBX_HIT_COUNT
};

typedef struct sbx_result {
	bool exited;          /* exit_code is meaningful */
	int exit_code;        /* 0..255 when exited, else -1 */
	int signal;           /* the signal that ended it, else 0 */
	bool timed_out;
	bool cancelled;       /* sbx_run_cancel() or sbx_sandbox_free() ended it before it ended */
	sbx_output out[2];    /* indexed by enum sbx_stream */
	bool isolated;
	const char *backend;  /* static string */
	/*
	 * Set when the command could not be started (or set up); then exited is
	 * false and start_errno holds the cause (ENOENT: not found; EACCES,
	 * ENOEXEC, EISDIR: found but cannot be run).
	 */
	char *error;
	int start_errno;
	sbx_resources resources;
} sbx_result;

/* Frees |r| and everything in it.  NULL is ignored. */
SBX_API void sbx_result_free(sbx_result *r);

/* Names of enum values, as used in the JSON result ("cgroup_v1", "file_size", ...). */
SBX_API const char *sbx_mechanism_name(enum sbx_mechanism m);
SBX_API const char *sbx_limit_name(enum sbx_limit l);
SBX_API const char *sbx_hit_name(enum sbx_hit h);

/*
 * Called exactly once per started run, from the loop.  The callback owns
 * |result| (free it with sbx_result_free()).  The run handle is gone by the
 * time it is called.
 */
typedef void (*sbx_run_cb)(sbx_result *result, void *arg);

/*
 * Starts a run.  Everything in |o| is copied.  On success *out (may be NULL)
 * is set and |cb| will fire exactly once; on failure nothing was started, no
 * fd or process is left behind, and |cb| never fires.  A program that is
 * missing or cannot be executed is not a failure here: the run completes with
 * result->error set.  When more than max_starting runs are being set up, the
 * run waits in a queue and starts in order.
 */
SBX_API int sbx_run_start(sbx_sandbox *sb, const sbx_run_options *o, sbx_run_cb cb,
                          void *arg, sbx_run **out, sbx_error *err);

/*
 * Kills the run's whole process tree.  The callback still fires once, later,
 * from the loop, with cancelled set -- unless the command had already ended
 * by itself and only its output was being drained, in which case the result
 * is that ending.  Calling it again, or after the run finished but before
 * its callback, is harmless.
 */
SBX_API void sbx_run_cancel(sbx_run *run);

/* The run's process id while it runs, else 0. */
SBX_API int sbx_run_pid(const sbx_run *run);

/* -------------------------------------------------------- capabilities */

typedef struct sbx_caps_item {
	const char *name;             /* "bwrap", "network_none", "memory", ... */
	bool available;               /* the backend is usable / the item is enforced */
	enum sbx_mechanism mechanism; /* limits only: how it would be enforced */
	char detail[512];             /* how, or why not, in a sentence */
} sbx_caps_item;

#define SBX_CAPS_MAX 16

typedef struct sbx_caps {
	const char *backend;                     /* the backend reported on; NULL: none usable */
	sbx_caps_item backends[SBX_CAPS_MAX];    /* every backend, usable or not */
	unsigned nbackends;
	sbx_caps_item features[SBX_CAPS_MAX];    /* each policy feature under |backend| */
	unsigned nfeatures;
	sbx_caps_item limits[SBX_LIMIT_COUNT];   /* each limit under |backend| */
} sbx_caps;

/*
 * Fills |out| with what this machine can enforce with |backend|
 * (SBX_BACKEND_AUTO: the one auto would pick), found by reading files only:
 * it starts no process and creates no file, namespace or cgroup.
 */
SBX_API int sbx_caps_get(enum sbx_backend backend, sbx_caps *out);

/* ---------------------------------------------------------------- wrap */

typedef struct sbx_wrapped {
	char **argv;  /* the command line to spawn, NULL-terminated */
	char **env;   /* its environment, "NAME=VALUE", NULL-terminated */
	char *cwd;    /* where to start it; NULL for anywhere */
} sbx_wrapped;

/*
 * The command line that runs the command of |o| in this sandbox, for a
 * caller that spawns and watches the process itself.  argv stands on its
 * own: it sets the environment and the directory itself (env and cwd repeat
 * them for callers who want them).  Spawn it in a new session with only fds
 * 0-2 open: bubblewrap passes every other inherited fd on to the command.
 * Standing on its own, it names what it binds by path, checked for links
 * now; runs the library starts bind from descriptors opened without
 * following links, which another command that can write the same
 * directories cannot swap in between.
 * The timeout, output and stdin fields of |o| are not used.  On success *out
 * is set; free it with sbx_wrapped_free().
 */
SBX_API int sbx_sandbox_wrap(sbx_sandbox *sb, const sbx_run_options *o, sbx_wrapped **out,
                             sbx_error *err);
SBX_API void sbx_wrapped_free(sbx_wrapped *w);

/* ------------------------------------------------------------- session */

typedef struct sbx_session sbx_session;

typedef struct sbx_session_options {
	/*
	 * The directory commands may write and start in.  It must exist; it is
	 * used where it is and never deleted.  NULL makes a private one under
	 * $TMPDIR (else /tmp), named "sbx-...", removed at close.
	 */
	const char *workspace;
	sbx_sandbox_options sandbox;
} sbx_session_options;

/* Fills |o| with the defaults: a private workspace, the default sandbox. */
SBX_API void sbx_session_options_init(sbx_session_options *o);

/*
 * Opens a session on |base| (borrowed), or on a private loop of its own when
 * |base| is NULL, which is what a program without an event loop wants.  The
 * policy is copied, and the workspace and a private scratch directory are
 * added to its writable paths; every run gets TMPDIR pointing at the scratch
 * directory.  Directories that sessions of a killed supervisor left under
 * $TMPDIR are removed first (only "sbx-" directories of this user whose
 * owner is gone).  A session that fails to open leaves nothing behind.  On
 * success *out is set; end it with sbx_session_free().
 */
SBX_API int sbx_session_open(struct event_base *base, const sbx_policy *policy,
                             const sbx_session_options *options, sbx_session **out,
                             sbx_error *err);

/* The workspace and the scratch directory, as real paths.  Valid until the session is freed. */
SBX_API const char *sbx_session_workspace(const sbx_session *s);
SBX_API const char *sbx_session_scratch(const sbx_session *s);
/* The sandbox inside; NULL once the session is closed. */
SBX_API sbx_sandbox *sbx_session_sandbox(sbx_session *s);

/*
 * sbx_run_start() in the session: a relative cwd is taken from the
 * workspace, and no cwd means the workspace.  SBX_ECLOSED once closed.
 */
SBX_API int sbx_session_run_start(sbx_session *s, const sbx_run_options *o, sbx_run_cb cb,
                                  void *arg, sbx_run **out, sbx_error *err);

/*
 * The same with a policy of its own for this one run, which must narrow the
 * session's (see sbx_policy_check_narrows(); -EPERM names the field).  The
 * session's workspace and scratch directory stay writable.  It costs a
 * sandbox per call, made and freed by the session.
 */
SBX_API int sbx_session_run_start_policy(sbx_session *s, const sbx_policy *policy,
                                         const sbx_run_options *o, sbx_run_cb cb, void *arg,
                                         sbx_run **out, sbx_error *err);

/*
 * Runs one command and waits for it, by running the session's loop until
 * its result is in (other events on a caller's loop run meanwhile); it must
 * not be called from a callback on that loop (SBX_ESTATE).  The result is
 * stored in *out (caller frees) whenever the command was started.  With
 * |check|, a command that did not exit with status 0 makes the call return
 * SBX_EFAILED with the message of sbx_result_check() in |err|; *out still
 * holds the whole result.
 */
SBX_API int sbx_session_run(sbx_session *s, const sbx_run_options *o, bool check,
                            sbx_result **out, sbx_error *err);

/*
 * Returns 0 when |r| exited with status 0, else SBX_EFAILED and, in |err|,
 * a message that says which command (from |o|) and why it failed -- it
 * could not start, timed out, was cancelled, hit a limit, was killed by a
 * signal or exited with a status -- followed by the last lines of its stderr.
 */
SBX_API int sbx_result_check(const sbx_result *r, const sbx_run_options *o, sbx_error *err);

/*
 * Closes the session: cancels runs still in flight and reaps them (their
 * callbacks fire, with cancelled set, from inside this call), then removes
 * the directories the session made -- without following links or crossing
 * into other mounts, whatever the programs left in them.  A workspace the
 * caller supplied is left as the commands made it.  Returns an error, with
 * the path, when something could not be removed.  Closing again is
 * harmless and returns 0; other calls on a closed session fail with
 * SBX_ECLOSED.
 */
SBX_API int sbx_session_close(sbx_session *s, sbx_error *err);

/* Closes |s| if it is open and frees it.  NULL is ignored. */
SBX_API void sbx_session_free(sbx_session *s);

/* ---------------------------------------------------------------- sync */

/*
 * Runs one command on a private event loop and returns its result in
 * *out (caller frees with sbx_result_free()).  |policy| and |sandbox_options|
 * may be NULL.  Usable from a program with no event loop of its own.
 */
SBX_API int sbx_run_sync(const sbx_policy *policy, const sbx_sandbox_options *sandbox_options,
                         const sbx_run_options *o, sbx_result **out, sbx_error *err);

#ifdef __cplusplus
}
#endif
#endif /* SBX_H */
