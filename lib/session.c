/*
 * session.c -- a sandbox with a workspace and scratch space around it.
 *
 * Everything a session makes lives in one directory, $TMPDIR/sbx-PID-XXXXXX:
 *
 *   .lock       held (flock) while the session is open
 *   tmp/        the scratch space; TMPDIR in every run
 *   workspace/  the private workspace, when the caller gave none
 *
 * so closing removes one tree, and a session started after a supervisor was
 * killed can tell an abandoned directory (its pid gone and its lock free)
 * from a live one.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <event2/event.h>

#include "internal.h"

/* A sandbox made for one run with a policy of its own. */
struct extra {
	sbx_session *s;
	sbx_sandbox *sb;
	sbx_run_cb cb;
	void *arg;
	struct event *ev_free;   /* frees the sandbox once its run has called back */
	bool done;
	struct extra *prev, *next;
};

struct sbx_session {
	struct event_base *base;
	bool own_base;
	bool closed;
	sbx_policy *policy;       /* the caller's, plus workspace, scratch and TMPDIR */
	sbx_sandbox_options sandbox_options;
	sbx_sandbox *sb;
	struct extra *extras;
	char *root;               /* the directory the session made */
	char *workspace;
	char *scratch;
	int lock_fd;
};

void sbx_session_options_init(sbx_session_options *o)
{
	memset(o, 0, sizeof *o);
	sbx_sandbox_options_init(&o->sandbox);
}

/* $TMPDIR when it names a directory, else /tmp, as a real path. */
static char *temp_root(void)
{
	const char *dir = getenv("TMPDIR");
	struct stat st;
	if (!dir || dir[0] != '/' || stat(dir, &st) < 0 || !S_ISDIR(st.st_mode))
		dir = "/tmp";
	return realpath(dir, NULL);
}

static char *join(const char *dir, const char *name)
{
	char *p;
	return asprintf(&p, "%s/%s", dir, name) < 0 ? NULL : p;
}

static bool has_writable(const sbx_policy *p, const char *path)
{
	for (size_t i = 0; i < p->writable.n; i++) {
		if (strcmp(p->writable.v[i], path) == 0)
			return true;
	}
	return false;
}

/* The workspace and scratch space writable, and TMPDIR pointing at the scratch space. */
static int add_session_paths(const sbx_session *s, sbx_policy *p, sbx_error *err)
{
	int rc = 0;
	if (!has_writable(p, s->workspace))
		rc = sbx_policy_add_writable(p, s->workspace, err);
	if (rc == 0 && !has_writable(p, s->scratch))
		rc = sbx_policy_add_writable(p, s->scratch, err);
	char *tmpdir = NULL;
	if (rc == 0 && asprintf(&tmpdir, "TMPDIR=%s", s->scratch) < 0)
		rc = sbx__error(err, -ENOMEM, "out of memory opening a session");
	if (rc == 0)
		rc = sbx_policy_set_env(p, tmpdir, err);
	free(tmpdir);
	return rc;
}

/* Makes the session's directory and takes its lock. */
static int make_root(sbx_session *s, sbx_error *err)
{
	char *tmp = temp_root();
	if (!tmp)
		return sbx__error(err, -errno, "could not find a temporary directory: %s",
		                  strerrordesc_np(errno));
	sbx__reclaim_sessions(tmp);
	int rc = 0;
	if (asprintf(&s->root, "%s/sbx-%d-XXXXXX", tmp, (int)getpid()) < 0) {
		s->root = NULL;
		rc = sbx__error(err, -ENOMEM, "out of memory opening a session");
	} else if (!mkdtemp(s->root)) {
		rc = sbx__error(err, -errno, "could not make a session directory in '%s': %s", tmp,
		                strerrordesc_np(errno));
		free(s->root);
		s->root = NULL;
	}
	free(tmp);
	if (rc < 0)
		return rc;

	char *lock = join(s->root, SBX__SESSION_LOCK);
	if (!lock)
		return sbx__error(err, -ENOMEM, "out of memory opening a session");
	s->lock_fd = open(lock, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (s->lock_fd < 0 || flock(s->lock_fd, LOCK_EX | LOCK_NB) < 0)
		rc = sbx__error(err, -errno, "could not lock '%s': %s", lock, strerrordesc_np(errno));
	else
		rc = sbx__fd_move_high(&s->lock_fd);
	free(lock);
	if (rc < 0)
		return rc;

	if (!(s->scratch = join(s->root, "tmp")))
		return sbx__error(err, -ENOMEM, "out of memory opening a session");
	if (mkdir(s->scratch, 0700) < 0)
		return sbx__error(err, -errno, "could not make '%s': %s", s->scratch,
		                  strerrordesc_np(errno));
	return 0;
}

/* The caller's workspace as a real path, or a private one inside the root. */
static int find_workspace(sbx_session *s, const char *given, sbx_error *err)
{
	if (!given) {
		if (!(s->workspace = join(s->root, "workspace")))
			return sbx__error(err, -ENOMEM, "out of memory opening a session");
		if (mkdir(s->workspace, 0700) < 0)
			return sbx__error(err, -errno, "could not make '%s': %s", s->workspace,
			                  strerrordesc_np(errno));
		return 0;
	}
	if (given[0] == '\0')
		return sbx__error(err, -EINVAL, "the workspace path is empty");
	if (!(s->workspace = realpath(given, NULL)))
		return sbx__error(err, -errno, "workspace '%s': %s", given, strerrordesc_np(errno));
	struct stat st;
	if (stat(s->workspace, &st) < 0 || !S_ISDIR(st.st_mode))
		return sbx__error(err, -ENOTDIR, "workspace '%s' is not a directory", given);
	return 0;
}

int sbx_session_open(struct event_base *base, const sbx_policy *policy,
                     const sbx_session_options *options, sbx_session **out, sbx_error *err)
{
	if (!out)
		return sbx__error(err, -EINVAL, "sbx_session_open needs a place for the session");
	*out = NULL;
	sbx_session_options opts;
	if (options)
		opts = *options;
	else
		sbx_session_options_init(&opts);

	sbx_session *s = calloc(1, sizeof *s);
	if (!s)
		return sbx__error(err, -ENOMEM, "out of memory opening a session");
	s->lock_fd = -1;
	s->sandbox_options = opts.sandbox;
	s->base = base;
	int rc = 0;
	if (!base) {
		s->own_base = true;
		if (!(s->base = event_base_new()))
			rc = sbx__error(err, -ENOMEM, "could not make an event loop");
	}
	if (rc == 0)
		rc = make_root(s, err);
	if (rc == 0)
		rc = find_workspace(s, opts.workspace, err);
	if (rc == 0 && !(s->policy = policy ? sbx_policy_copy(policy) : sbx_policy_new()))
		rc = sbx__error(err, -ENOMEM, "out of memory opening a session");
	if (rc == 0)
		rc = add_session_paths(s, s->policy, err);
	if (rc == 0)
		rc = sbx_sandbox_new(s->base, s->policy, &s->sandbox_options, &s->sb, err);
	if (rc < 0) {
		/* It owns nothing afterwards: what was made is removed. */
		sbx_session_free(s);
		return rc;
	}
	*out = s;
	return 0;
}

const char *sbx_session_workspace(const sbx_session *s)
{
	return s->workspace;
}

const char *sbx_session_scratch(const sbx_session *s)
{
	return s->scratch;
}

sbx_sandbox *sbx_session_sandbox(sbx_session *s)
{
	return s->closed ? NULL : s->sb;
}

static int closed_error(sbx_error *err)
{
	return sbx__error(err, SBX_ECLOSED, "the session is closed; open a new one");
}

/* |o| with its cwd taken from the workspace; *path is what to free. */
static int session_cwd(const sbx_session *s, const sbx_run_options *o, sbx_run_options *copy,
                       char **path, sbx_error *err)
{
	*copy = *o;
	*path = NULL;
	if (!o->cwd) {
		copy->cwd = s->workspace;
		return 0;
	}
	if (o->cwd[0] == '/')
		return 0;
	if (o->cwd[0] == '\0')
		return sbx__error(err, -EINVAL, "cwd is empty; leave it unset for the workspace");
	for (const char *c = o->cwd; c; c = strchr(c, '/') ? strchr(c, '/') + 1 : NULL) {
		if (strncmp(c, "..", 2) == 0 && (c[2] == '/' || c[2] == '\0'))
			return sbx__error(err, -EINVAL, "cwd '%s' climbs out of the workspace with '..'; "
			                  "give an absolute path for a directory elsewhere", o->cwd);
	}
	if (!(*path = join(s->workspace, o->cwd)))
		return sbx__error(err, -ENOMEM, "out of memory");
	if (strlen(*path) >= PATH_MAX) {
		int rc = sbx__error(err, -ENAMETOOLONG, "cwd '%s' in the workspace is longer than %d bytes",
		                    o->cwd, PATH_MAX - 1);
		free(*path);
		*path = NULL;
		return rc;
	}
	copy->cwd = *path;
	return 0;
}

int sbx_session_run_start(sbx_session *s, const sbx_run_options *o, sbx_run_cb cb, void *arg,
                          sbx_run **out, sbx_error *err)
{
	if (!s || !o)
		return sbx__error(err, -EINVAL, "sbx_session_run_start needs a session and run options");
	if (s->closed)
		return closed_error(err);
	sbx_run_options copy;
	char *cwd;
	int rc = session_cwd(s, o, &copy, &cwd, err);
	if (rc == 0)
		rc = sbx_run_start(s->sb, &copy, cb, arg, out, err);
	free(cwd);
	return rc;
}

/* ------------------------------------------------- runs with their own policy */

static void extra_unlink(sbx_session *s, struct extra *e)
{
	if (e->prev)
		e->prev->next = e->next;
	else
		s->extras = e->next;
	if (e->next)
		e->next->prev = e->prev;
}

static void extra_free(struct extra *e)
{
	sbx_sandbox_free(e->sb);
	if (e->ev_free)
		event_free(e->ev_free);
	free(e);
}

static void on_extra_free(evutil_socket_t fd, short what, void *arg)
{
	struct extra *e = arg;
	(void)fd;
	(void)what;
	extra_unlink(e->s, e);
	extra_free(e);
}

static void on_extra_done(sbx_result *r, void *arg)
{
	struct extra *e = arg;
	e->done = true;
	/* A sandbox cannot be freed from its own run's callback: the next turn
	 * of the loop does it, unless the session is closing and frees it. */
	if (!e->s->closed)
		event_active(e->ev_free, EV_TIMEOUT, 1);
	e->cb(r, e->arg);
}

int sbx_session_run_start_policy(sbx_session *s, const sbx_policy *policy,
                                 const sbx_run_options *o, sbx_run_cb cb, void *arg,
                                 sbx_run **out, sbx_error *err)
{
	if (!s || !o)
		return sbx__error(err, -EINVAL,
		                  "sbx_session_run_start_policy needs a session and run options");
	if (!policy)
		return sbx_session_run_start(s, o, cb, arg, out, err);
	if (s->closed)
		return closed_error(err);
	sbx_run_options copy;
	char *cwd;
	int rc = session_cwd(s, o, &copy, &cwd, err);
	if (rc < 0)
		return rc;
	struct extra *e = calloc(1, sizeof *e);
	sbx_policy *p = sbx_policy_copy(policy);
	if (!e || !p || !(e->ev_free = event_new(s->base, -1, 0, on_extra_free, e)))
		rc = sbx__error(err, -ENOMEM, "out of memory starting a run");
	if (rc == 0)
		rc = add_session_paths(s, p, err);
	if (rc == 0)
		rc = sbx_policy_check_narrows(s->policy, p, err);
	if (rc == 0)
		rc = sbx_sandbox_new(s->base, p, &s->sandbox_options, &e->sb, err);
	if (rc == 0) {
		e->s = s;
		e->cb = cb;
		e->arg = arg;
		rc = sbx_run_start(e->sb, &copy, on_extra_done, e, out, err);
	}
	sbx_policy_free(p);
	free(cwd);
	if (rc < 0) {
		if (e)
			extra_free(e);
		return rc;
	}
	e->next = s->extras;
	if (s->extras)
		s->extras->prev = e;
	s->extras = e;
	return 0;
}

/* ------------------------------------------------------------- blocking */

/* One blocking call's wait; on the heap, because a call that cannot wait
 * leaves it to the callback that comes later. */
struct waiter {
	sbx_result *result;
	bool abandoned;
};

static void on_sync_done(sbx_result *r, void *arg)
{
	struct waiter *w = arg;
	if (w->abandoned) {
		sbx_result_free(r);
		free(w);
		return;
	}
	w->result = r;
}

static int nested_error(sbx_error *err)
{
	return sbx__error(err, SBX_ESTATE, "sbx_session_run cannot wait from inside a callback "
	                  "on the session's own loop; use sbx_session_run_start there");
}

int sbx_session_run(sbx_session *s, const sbx_run_options *o, bool check, sbx_result **out,
                    sbx_error *err)
{
	if (!s || !o || !out)
		return sbx__error(err, -EINVAL, "sbx_session_run needs a session, run options and a "
		                  "place for the result");
	*out = NULL;
	if (s->closed)
		return closed_error(err);
	if (sbx__callback_base == s->base)
		return nested_error(err);
	struct waiter *w = calloc(1, sizeof *w);
	if (!w)
		return sbx__error(err, -ENOMEM, "out of memory");
	sbx_run *run;
	int rc = sbx_session_run_start(s, o, on_sync_done, w, &run, err);
	if (rc < 0) {
		free(w);
		return rc;
	}
	/* The run keeps events on the loop until its callback, so each pass
	 * blocks until something happens.  The loop refuses to run (-1) when
	 * this is a callback of the caller's on the same loop: then the run is
	 * cancelled and its result dropped when it arrives. */
	while (!w->result) {
		if (event_base_loop(s->base, EVLOOP_ONCE) < 0)
			break;
	}
	if (!w->result) {
		w->abandoned = true;
		sbx_run_cancel(run);
		return nested_error(err);
	}
	*out = w->result;
	free(w);
	return check ? sbx_result_check(*out, o, err) : 0;
}

/* --------------------------------------------------------------- closing */

int sbx_session_close(sbx_session *s, sbx_error *err)
{
	if (!s || s->closed)
		return 0;
	s->closed = true;
	/* Runs first: nothing may still write into what is removed next.
	 * Freeing a sandbox kills and reaps its runs, and calls them back. */
	while (s->extras) {
		struct extra *e = s->extras;
		extra_unlink(s, e);
		extra_free(e);
	}
	sbx_sandbox_free(s->sb);
	s->sb = NULL;
	int rc = 0;
	if (s->root)
		rc = sbx__remove_tree(s->root, err);
	if (s->lock_fd >= 0)
		close(s->lock_fd);
	s->lock_fd = -1;
	return rc;
}

void sbx_session_free(sbx_session *s)
{
	if (!s)
		return;
	sbx_session_close(s, NULL);
	sbx_policy_free(s->policy);
	if (s->own_base && s->base)
		event_base_free(s->base);
	free(s->root);
	free(s->workspace);
	free(s->scratch);
	free(s);
}
