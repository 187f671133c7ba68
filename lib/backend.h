/*
 * backend.h -- what a backend decides; the run engine stays blind to which
 * one it drives.
 *
 * A backend turns a command into the command line that is spawned (wrap),
 * and may report on the spawned process's fd 3 in bubblewrap's
 * --json-status-fd format: a line with "child-pid" when the sandbox's first
 * process exists, and one with "exit-code" when the command has ended.  The
 * engine spawns, watches, drains and kills the same way for all of them.
 */
#ifndef SBX_BACKEND_H
#define SBX_BACKEND_H

/* A command as the caller gave it, with its program found on the host. */
struct sbx__command {
	char *const *argv;
	char *const *env;    /* "NAME=VALUE", NULL-terminated */
	const char *program; /* argv[0] resolved through PATH: what is executed */
	const char *cwd;     /* NULL: the caller's */
};

struct sbx__backend {
	const char *name;
	bool isolated;
	/* The spawned process reports on fd 3 (see above). */
	bool status_fd;
	/* Processes of the backend's own in every run's tree, which a
	 * processes limit allows on top of the command's. */
	unsigned own_processes;
	/*
	 * Checks that the backend can run here, without creating anything the
	 * caller would have to clean up, and sets up sb->backend_state.  When it
	 * cannot run, returns SBX_EUNAVAILABLE and says in |err| what to
	 * install or change.  NULL: nothing to do.
	 */
	int (*open)(sbx_sandbox *sb, sbx_error *err);
	void (*close)(sbx_sandbox *sb);
	/*
	 * A warning for every part of the policy's boundary (paths, network,
	 * protected defaults) this backend cannot enforce.  Once per sandbox;
	 * limits are the engine's (limits.c).  NULL: it enforces them all.
	 */
	int (*describe)(const sbx_policy *p, sbx__strv *warnings);
	/*
	 * The command line to spawn for |cmd| (with |with_status|, one that
	 * reports on fd 3).  When |fds| is not NULL the backend may open
	 * descriptors for the child and name them in the command line (the
	 * i-th becomes fd SBX__PASS_FD_BASE + i): a path opened now cannot be
	 * swapped for a link before the sandbox uses it.  NULL |fds|: the
	 * command line must stand on its own (sbx_sandbox_wrap).  NULL wrap:
	 * the command itself.
	 */
	int (*wrap)(sbx_sandbox *sb, const struct sbx__command *cmd, bool with_status,
	            sbx__strv *argv, struct sbx__fds *fds, sbx_error *err);
};

extern const struct sbx__backend sbx__backend_passthrough;
extern const struct sbx__backend sbx__backend_bwrap;

/* Whether bwrap could run here, found without starting anything: 0 with its
 * path in |why|, or SBX_EUNAVAILABLE with the reason. */
int sbx__bwrap_caps(char *why, size_t size);

#endif /* SBX_BACKEND_H */
