/*
 * backend_bwrap.c -- isolation through bubblewrap.
 *
 * Each run is one bwrap process, which makes new user, PID, IPC, UTS, cgroup
 * and (unless the network is full) network namespaces, and builds the
 * command's view of the files:
 *
 *   /                  the host's, read-only
 *   /dev, /proc, /tmp  a minimal /dev, the new PID namespace's /proc, a
 *                      private tmpfs
 *   writable paths     bound read-write at the same place, parents first,
 *                      from fds opened here without following links
 *                      (--bind-fd): bwrap resolves a name it is given
 *                      itself, later, and a command of another run that
 *                      can write the workspace could swap a directory for
 *                      a link in between (tests/check_isolation.c)
 *   masks              (protect.c) a read-only bind of the path over itself,
 *                      or for hidden paths an unreadable stub over a file and
 *                      a mode-000 read-only tmpfs over a directory
 *
 * A denied path that does not exist yet inside a writable path gets a
 * read-only mode-000 tmpfs too, so that it cannot be created.  bwrap has to
 * make a mount point for it, which appears on the host as an empty directory;
 * the sandbox removes the ones it caused when it is freed.  Outside writable
 * paths a missing path needs nothing: the read-only root already keeps it
 * from being created.
 *
 * bwrap reports on fd 3 (--json-status-fd): "child-pid" once the namespace's
 * init exists, then "exit-code" when the command has ended.  No "exit-code"
 * before bwrap exits means bwrap itself failed to set up (it exits 1 then,
 * which is never taken for the command's status).  The engine reads it.
 *
 * Killing: SIGKILL to the namespace's init ends every process in the PID
 * namespace at once; bwrap is killed with it.  If the supervisor dies, the
 * parent-death signal kills bwrap and --die-with-parent kills the namespace.
 * One gap is bwrap's own: its namespace init arms --die-with-parent only
 * after it has built the sandbox, so a supervisor killed during those few
 * milliseconds of set-up leaves a sandbox whose command still runs.  Once
 * the command runs, nothing survives the supervisor.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "internal.h"
#include "protect.h"

struct bwrap {
	char path[PATH_MAX];       /* the bwrap program */
	char stub[PATH_MAX];       /* an empty mode-000 file, bound over hidden files */
	struct sbx__masks masks;
	sbx__strv placeholders;    /* mount points bwrap made on the host for us */
};

/* ------------------------------------------------------------ finding bwrap */

/* Finds |name| in $PATH (or takes it as a path); 0 or -ENOENT/-EACCES. */
static int find_program(const char *name, char *out, size_t size)
{
	if (strchr(name, '/')) {
		if (access(name, X_OK) < 0)
			return -errno;
		snprintf(out, size, "%s", name);
		return 0;
	}
	const char *path = getenv("PATH");
	if (!path || !*path)
		path = "/usr/local/bin:/usr/bin:/bin";
	int rc = -ENOENT;
	for (const char *dir = path; dir; dir = strchr(dir, ':') ? strchr(dir, ':') + 1 : NULL) {
		size_t dlen = strcspn(dir, ":");
		if (dlen == 0)
			continue;
		int n = snprintf(out, size, "%.*s/%s", (int)dlen, dir, name);
		if (n < 0 || (size_t)n >= size)
			continue;
		struct stat st;
		if (stat(out, &st) == 0 && S_ISREG(st.st_mode)) {
			if (access(out, X_OK) == 0)
				return 0;
			rc = -EACCES;
		}
	}
	return rc;
}

/* The bwrap to use: $SBX_BWRAP when set, else "bwrap" from $PATH. */
static int locate(char *out, size_t size, sbx_error *err)
{
	const char *name = getenv("SBX_BWRAP");
	if (!name || !*name)
		name = "bwrap";
	int rc = find_program(name, out, size);
	if (rc < 0)
		return sbx__error(err, SBX_EUNAVAILABLE,
		                  "bubblewrap ('%s') %s: install the Debian package bubblewrap "
		                  "(apt-get install bubblewrap), or set SBX_BWRAP to its path",
		                  name, rc == -EACCES ? "is not executable" : "was not found");
	return 0;
}

/*
 * Whether bwrap can make namespaces here, asked without starting anything:
 * user namespaces switched off by sysctl are the common reason it cannot.
 */
static const char *userns_blocker(void)
{
	static const struct {
		const char *file;
		const char *bad;
		const char *why;
	} knobs[] = {
		{ "/proc/sys/user/max_user_namespaces", "0",
		  "user namespaces are switched off (user.max_user_namespaces = 0); raise it with sysctl" },
		{ "/proc/sys/kernel/unprivileged_userns_clone", "0",
		  "unprivileged user namespaces are switched off (kernel.unprivileged_userns_clone = 0); "
		  "set it to 1 with sysctl, or use the landlock backend" },
		{ "/proc/sys/kernel/apparmor_restrict_unprivileged_userns", "1",
		  "AppArmor restricts unprivileged user namespaces "
		  "(kernel.apparmor_restrict_unprivileged_userns = 1); allow bwrap in an AppArmor profile, "
		  "or use the landlock backend" },
	};
	for (size_t i = 0; i < SBX__ARRAY_LEN(knobs); i++) {
		if (getuid() == 0 && i > 0)
			break; /* only the first applies to root */
		char buf[32] = "";
		int fd = open(knobs[i].file, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		ssize_t n = read(fd, buf, sizeof buf - 1);
		close(fd);
		if (n > 0) {
			buf[n] = '\0';
			buf[strcspn(buf, "\n")] = '\0';
			if (strcmp(buf, knobs[i].bad) == 0)
				return knobs[i].why;
		}
	}
	return NULL;
}

int sbx__bwrap_caps(char *why, size_t size)
{
	char path[PATH_MAX];
	sbx_error err;
	if (locate(path, sizeof path, &err) < 0) {
		snprintf(why, size, "%s", err.message);
		return SBX_EUNAVAILABLE;
	}
	const char *blocker = userns_blocker();
	if (blocker) {
		snprintf(why, size, "%s", blocker);
		return SBX_EUNAVAILABLE;
	}
	snprintf(why, size, "%s", path);
	return 0;
}

/* ------------------------------------------------------------ the stub file */

/*
 * The stub bound over hidden files lives in a directory of this user's own,
 * so a wrapped command line printed by `sbx wrap` still works after this
 * process is gone: $XDG_RUNTIME_DIR/sbx, or /tmp/sbx-stub-UID.  The
 * directory is checked to be ours and private, and the file to be empty and
 * mode 000, so another user cannot swap in content.
 */
static int make_stub(char *out, size_t size, sbx_error *err)
{
	const char *runtime = getenv("XDG_RUNTIME_DIR");
	char dir[PATH_MAX - 16];
	if (runtime && runtime[0] == '/' && strlen(runtime) < sizeof dir - 8)
		snprintf(dir, sizeof dir, "%s/sbx", runtime);
	else
		snprintf(dir, sizeof dir, "/tmp/sbx-stub-%u", (unsigned)getuid());
	if (mkdir(dir, 0700) < 0 && errno != EEXIST)
		return sbx__error(err, -errno, "could not make the directory '%s': %s", dir,
		                  sbx_strerror(-errno));
	int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	struct stat st;
	if (dfd < 0 || fstat(dfd, &st) < 0 || st.st_uid != getuid() || (st.st_mode & 077)) {
		int e = dfd < 0 ? errno : EPERM;
		if (dfd >= 0)
			close(dfd);
		return sbx__error(err, -e, "'%s' is not a private directory of this user; remove it", dir);
	}
	/* Made with O_EXCL (a new file may be created mode 000), checked
	 * without opening (nobody but root can open it afterwards). */
	int rc = 0;
	int fd = openat(dfd, "hidden", O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0);
	if (fd >= 0)
		close(fd);
	else if (errno != EEXIST)
		rc = -errno;
	if (rc == 0 && fstatat(dfd, "hidden", &st, AT_SYMLINK_NOFOLLOW) < 0)
		rc = -errno;
	if (rc == 0 && (!S_ISREG(st.st_mode) || st.st_size != 0 || (st.st_mode & 07777) != 0 ||
	                st.st_uid != getuid()))
		rc = -EPERM;
	close(dfd);
	if (rc < 0)
		return sbx__error(err, rc, "'%s/hidden' is not an empty mode-000 file; remove it", dir);
	snprintf(out, size, "%s/hidden", dir);
	return 0;
}

/* ------------------------------------------------------------ argv */

static int push(sbx__strv *a, const char *s)
{
	return sbx__strv_push(a, s);
}

static int push2(sbx__strv *a, const char *s1, const char *s2)
{
	int rc = push(a, s1);
	return rc ? rc : push(a, s2);
}

static int push3(sbx__strv *a, const char *s1, const char *s2, const char *s3)
{
	int rc = push2(a, s1, s2);
	return rc ? rc : push(a, s3);
}

/* Whether |path| is |dir| or below it. */
static bool is_within(const char *path, const char *dir)
{
	size_t n = strlen(dir);
	if (n == 1 && dir[0] == '/')
		return true;
	return strncmp(path, dir, n) == 0 && (path[n] == '/' || path[n] == '\0');
}

static bool inside_writable(const sbx_policy *p, const char *path)
{
	for (size_t i = 0; i < p->writable.n; i++)
		if (is_within(path, p->writable.v[i]))
			return true;
	return false;
}

/* Shorter paths first, so a parent is mounted before what lies inside it. */
static int by_length(const void *a, const void *b)
{
	size_t la = strlen(*(char *const *)a), lb = strlen(*(char *const *)b);
	return la < lb ? -1 : la > lb;
}

/*
 * Opens |path| (absolute, normalised) as an O_PATH fd, one component at a
 * time with O_NOFOLLOW: 0, or -ELOOP when any component is a symbolic link,
 * -ENOTDIR when |want_dir| and it is not a directory, -errno otherwise.
 *
 * bwrap binds a source by name, following links, some milliseconds after we
 * looked at it.  A command of another run that can write the workspace can
 * swap a directory for a link to anywhere in between; a source opened here
 * and passed as an fd (--bind-fd) cannot change under us.
 */
static int open_nofollow(const char *path, bool want_dir, int *out)
{
	int fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	char name[NAME_MAX + 1];
	for (const char *c = path; *c;) {
		while (*c == '/')
			c++;
		size_t len = strcspn(c, "/");
		if (len == 0)
			break;
		if (len > NAME_MAX) {
			close(fd);
			return -ENAMETOOLONG;
		}
		memcpy(name, c, len);
		name[len] = '\0';
		c += len;
		int next = openat(fd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
		int e = errno;
		close(fd);
		if (next < 0)
			return -e;
		fd = next;
		struct stat st;
		if (fstat(fd, &st) < 0 || S_ISLNK(st.st_mode)) {
			close(fd);
			return -ELOOP;
		}
		if ((*c || want_dir) && !S_ISDIR(st.st_mode)) {
			close(fd);
			return -ENOTDIR;
		}
	}
	*out = fd;
	return 0;
}

/* "OPT FD DEST" for |fd| (taken), which becomes the child's next passed fd. */
static int push_fd(sbx__strv *a, struct sbx__fds *fds, const char *opt, int fd, const char *dest)
{
	char num[16];
	snprintf(num, sizeof num, "%zu", SBX__PASS_FD_BASE + fds->n);
	int rc = sbx__fds_push(fds, fd);
	return rc ? rc : push3(a, opt, num, dest);
}

/*
 * Binds |path| over itself (OPT is "--bind" or "--ro-bind"): from an fd
 * opened without following links when |fds| can carry one, else by name.
 */
static int bind_self(sbx__strv *a, struct sbx__fds *fds, const char *opt, const char *path,
                     bool want_dir)
{
	if (!fds)
		return push3(a, opt, path, path);
	int fd;
	int rc = open_nofollow(path, want_dir, &fd);
	if (rc < 0)
		return rc;
	char opt_fd[16];
	snprintf(opt_fd, sizeof opt_fd, "%s-fd", opt);
	return push_fd(a, fds, opt_fd, fd, path);
}

static int mask_args(struct bwrap *bw, const sbx_policy *p, const struct sbx__mask *m,
                     sbx__strv *a, struct sbx__fds *fds, bool *placeholder)
{
	struct stat st;
	*placeholder = false;
	if (lstat(m->path, &st) < 0) {
		if (m->only_existing || !inside_writable(p, m->path))
			return 0;
		/* Missing inside a writable path: keep it from being created. */
		*placeholder = true;
		return push3(a, "--perms", "0000", "--tmpfs") ?: push(a, m->path) ?:
		       push2(a, "--remount-ro", m->path);
	}
	if (S_ISLNK(st.st_mode)) {
		/* bwrap would follow it; mask what it points to instead, if the
		 * policy can name it. */
		char target[PATH_MAX];
		if (!realpath(m->path, target))
			return 0;
		struct sbx__mask resolved = { target, m->kind, m->only_existing };
		return mask_args(bw, p, &resolved, a, fds, placeholder);
	}
	if (m->kind == SBX__MASK_READ_ONLY)
		return bind_self(a, fds, "--ro-bind", m->path, false);
	if (S_ISDIR(st.st_mode))
		return push3(a, "--perms", "0000", "--tmpfs") ?: push(a, m->path) ?:
		       push2(a, "--remount-ro", m->path);
	return push3(a, "--ro-bind", bw->stub, m->path);
}

/* The writable path |path| lies in (the deepest), or NULL. */
static const char *writable_root(const sbx_policy *p, const char *path)
{
	const char *best = NULL;
	for (size_t i = 0; i < p->writable.n; i++)
		if (is_within(path, p->writable.v[i]) && (!best || strlen(p->writable.v[i]) > strlen(best)))
			best = p->writable.v[i];
	return best;
}

/* Whether a mask will mount something at its path (see mask_args). */
static bool mask_mounts(const sbx_policy *p, const struct sbx__mask *m)
{
	struct stat st;
	if (lstat(m->path, &st) == 0)
		return true;
	return !m->only_existing && inside_writable(p, m->path);
}

/*
 * A mount protects its mount point, not the name that leads to it: inside
 * a writable path, renaming a parent of a masked path away and making a new
 * one would put a fresh, unprotected file at the masked name.  So every
 * directory between the writable root and a mask is bound over itself,
 * read-write: it stays writable, but a mount point cannot be renamed or
 * removed.  A parent that does not exist yet is made first (--dir), and is
 * removed with the placeholders.  Parents are pinned shallowest first,
 * before any mask.
 */
/* Shorter first; equal strings next to each other. */
static int by_length_then_name(const void *a, const void *b)
{
	int rc = by_length(a, b);
	return rc ? rc : strcmp(*(char *const *)a, *(char *const *)b);
}

/* A missing directory to pin, made here (beneath an fd opened without
 * following links) and opened: *fd, or -errno. */
static int make_pin(const char *dir, int *fd)
{
	char parent[PATH_MAX];
	snprintf(parent, sizeof parent, "%s", dir);
	char *slash = strrchr(parent, '/');
	const char *name = slash + 1;
	*slash = '\0';
	int pfd;
	int rc = open_nofollow(parent[0] ? parent : "/", true, &pfd);
	if (rc < 0)
		return rc;
	if (mkdirat(pfd, name, 0755) < 0 && errno != EEXIST)
		rc = -errno;
	if (rc == 0) {
		*fd = openat(pfd, name, O_PATH | O_NOFOLLOW | O_DIRECTORY | O_CLOEXEC);
		if (*fd < 0)
			rc = errno == ENOTDIR ? -ELOOP : -errno;
	}
	close(pfd);
	return rc;
}

static int add_placeholder(struct bwrap *bw, const char *path)
{
	for (size_t j = 0; j < bw->placeholders.n; j++)
		if (strcmp(bw->placeholders.v[j], path) == 0)
			return 0;
	return sbx__strv_push(&bw->placeholders, path);
}

static int pin_ancestors(struct bwrap *bw, const sbx_policy *p, sbx__strv *a, struct sbx__fds *fds)
{
	sbx__strv pins = {0};
	int rc = 0;
	for (size_t i = 0; rc == 0 && i < bw->masks.n; i++) {
		const struct sbx__mask *m = &bw->masks.v[i];
		const char *root = writable_root(p, m->path);
		if (!root || !mask_mounts(p, m))
			continue;
		size_t rlen = strlen(root);
		char dir[PATH_MAX];
		snprintf(dir, sizeof dir, "%s", m->path);
		/* Each '/' after the root ends one ancestor. */
		for (char *slash = dir + rlen + (root[rlen - 1] == '/' ? 0 : 1);
		     rc == 0 && (slash = strchr(slash, '/')); slash++) {
			*slash = '\0';
			rc = sbx__strv_push(&pins, dir);
			*slash = '/';
		}
	}
	/* Sorted, the duplicates are neighbours: n log n however deep the
	 * masks, where comparing each with every other was quadratic. */
	if (pins.n)
		qsort(pins.v, pins.n, sizeof *pins.v, by_length_then_name);
	for (size_t i = 0; rc == 0 && i < pins.n; i++) {
		if (i > 0 && strcmp(pins.v[i], pins.v[i - 1]) == 0)
			continue;
		struct stat st;
		if (lstat(pins.v[i], &st) == 0) {
			/* A link would be followed: leave it (its target, when
			 * masked, is protected where it is). */
			if (!S_ISDIR(st.st_mode))
				continue;
			rc = bind_self(a, fds, "--bind", pins.v[i], true);
			if (rc == -ELOOP || rc == -ENOTDIR)
				rc = 0;  /* it became a link since: the same as above */
			continue;
		}
		rc = add_placeholder(bw, pins.v[i]);
		if (rc < 0)
			break;
		if (!fds) {
			rc = push2(a, "--dir", pins.v[i]) ?: push3(a, "--bind", pins.v[i], pins.v[i]);
			continue;
		}
		int fd;
		rc = make_pin(pins.v[i], &fd);
		if (rc == 0)
			rc = push_fd(a, fds, "--bind-fd", fd, pins.v[i]);
		else if (rc == -ELOOP || rc == -ENOTDIR)
			rc = 0;
	}
	sbx__strv_free(&pins);
	return rc;
}

static int bwrap_wrap(sbx_sandbox *sb, const struct sbx__command *cmd, bool with_status,
                      sbx__strv *a, struct sbx__fds *fds, sbx_error *err)
{
	struct bwrap *bw = sb->backend_state;
	const sbx_policy *p = sb->policy;
	*a = (sbx__strv){0};
	int rc = push(a, bw->path) ?:
	         push3(a, "--unshare-user", "--unshare-pid", "--unshare-ipc") ?:
	         push2(a, "--unshare-uts", "--unshare-cgroup-try") ?:
	         (p->network == SBX_NETWORK_NONE ? push(a, "--unshare-net") : 0) ?:
	         push3(a, "--disable-userns", "--die-with-parent", "--new-session") ?:
	         push2(a, "--cap-drop", "ALL") ?:
	         push3(a, "--ro-bind", "/", "/") ?:
	         push2(a, "--dev", "/dev") ?:
	         push2(a, "--proc", "/proc") ?:
	         push2(a, "--tmpfs", "/tmp");
	if (rc < 0)
		goto fail;

	char **writable = malloc((p->writable.n + 1) * sizeof *writable);
	if (!writable) {
		rc = -ENOMEM;
		goto fail;
	}
	if (p->writable.n)
		memcpy(writable, p->writable.v, p->writable.n * sizeof *writable);
	qsort(writable, p->writable.n, sizeof *writable, by_length);
	for (size_t i = 0; rc == 0 && i < p->writable.n; i++) {
		/* bwrap binds by name, following links: a link planted in a
		 * workspace by an earlier run would carry write access elsewhere.
		 * So a writable path must be its own real path. */
		char real[PATH_MAX];
		if (!realpath(writable[i], real)) {
			rc = sbx__error(err, -errno, "writable path '%s' %s", writable[i],
			                errno == ENOENT ? "does not exist" : "cannot be resolved");
			free(writable);
			goto fail_quiet;
		}
		if (strcmp(real, writable[i]) != 0) {
			rc = sbx__error(err, -ELOOP, "writable path '%s' passes through a symbolic link; "
			                "name the real path '%s'", writable[i], real);
			free(writable);
			goto fail_quiet;
		}
		rc = bind_self(a, fds, "--bind", writable[i], true);
		if (rc < 0 && rc != -ENOMEM) {
			rc = sbx__error(err, rc, "writable path '%s' changed while the sandbox was being "
			                "set up: %s", writable[i], sbx_strerror(rc));
			free(writable);
			goto fail_quiet;
		}
	}
	free(writable);

	if (rc == 0)
		rc = pin_ancestors(bw, p, a, fds);
	for (size_t i = 0; rc == 0 && i < bw->masks.n; i++) {
		bool placeholder;
		rc = mask_args(bw, p, &bw->masks.v[i], a, fds, &placeholder);
		if (rc == 0 && placeholder)
			rc = add_placeholder(bw, bw->masks.v[i].path);
		if (rc < 0 && rc != -ENOMEM) {
			rc = sbx__error(err, rc, "'%s' changed while the sandbox was being set up: %s",
			                bw->masks.v[i].path, sbx_strerror(rc));
			goto fail_quiet;
		}
	}
	/* The environment travels in the command line, so that a wrapped
	 * command run by hand gets exactly the run's. */
	if (rc == 0)
		rc = push(a, "--clearenv");
	for (size_t i = 0; rc == 0 && cmd->env[i]; i++) {
		const char *eq = strchr(cmd->env[i], '=');
		char *name = eq ? strndup(cmd->env[i], (size_t)(eq - cmd->env[i])) : NULL;
		rc = name ? push3(a, "--setenv", name, eq + 1) : -ENOMEM;
		free(name);
	}
	if (rc == 0 && cmd->cwd)
		rc = push2(a, "--chdir", cmd->cwd);
	if (rc == 0 && with_status)
		rc = push2(a, "--json-status-fd", "3");
	if (rc == 0)
		rc = push(a, "--");
	for (size_t i = 0; rc == 0 && cmd->argv[i]; i++)
		rc = push(a, i == 0 ? cmd->program : cmd->argv[i]);
	if (rc == 0)
		return 0;
fail:
	sbx__error(err, rc, "out of memory building the bwrap command line");
fail_quiet:
	sbx__strv_free(a);
	return rc;
}

/* ------------------------------------------------------------ open and close */

static int bwrap_open(sbx_sandbox *sb, sbx_error *err)
{
	struct bwrap *bw = calloc(1, sizeof *bw);
	if (!bw)
		return sbx__error(err, -ENOMEM, "out of memory");
	int rc = locate(bw->path, sizeof bw->path, err);
	if (rc == 0) {
		const char *blocker = userns_blocker();
		if (blocker)
			rc = sbx__error(err, SBX_EUNAVAILABLE, "bubblewrap cannot run here: %s", blocker);
	}
	if (rc == 0)
		rc = make_stub(bw->stub, sizeof bw->stub, err);
	if (rc == 0 && (rc = sbx__masks_build(sb->policy, &bw->masks)) < 0)
		sbx__error(err, rc, "out of memory");
	if (rc < 0) {
		sbx__masks_free(&bw->masks);
		free(bw);
		return rc;
	}
	sb->backend_state = bw;
	return 0;
}

/*
 * rmdir() without following a link on the way: each component is opened
 * with O_NOFOLLOW, so a parent that was swapped for a symbolic link (by a
 * process outside the sandbox, or before the parents were pinned) leads
 * nowhere instead of to a directory elsewhere.
 */
static void rmdir_nofollow(const char *path)
{
	char copy[PATH_MAX];
	snprintf(copy, sizeof copy, "%s", path);
	char *name = strrchr(copy, '/');
	if (!name || name[1] == '\0')
		return;
	*name++ = '\0';
	int dir = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	for (char *c = copy; dir >= 0 && *c;) {
		while (*c == '/')
			c++;
		if (!*c)
			break;
		char *end = strchr(c, '/');
		if (end)
			*end = '\0';
		int next = openat(dir, c, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		close(dir);
		dir = next;
		c = end ? end + 1 : c + strlen(c);
	}
	if (dir >= 0) {
		unlinkat(dir, name, AT_REMOVEDIR);
		close(dir);
	}
}

static void bwrap_close(sbx_sandbox *sb)
{
	struct bwrap *bw = sb->backend_state;
	if (!bw)
		return;
	/* Only empty directories go: rmdir refuses anything else, so a path
	 * somebody filled in the meantime stays. */
	for (size_t i = bw->placeholders.n; i-- > 0;)
		rmdir_nofollow(bw->placeholders.v[i]);
	sbx__strv_free(&bw->placeholders);
	sbx__masks_free(&bw->masks);
	free(bw);
	sb->backend_state = NULL;
}

const struct sbx__backend sbx__backend_bwrap = {
	.name = "bwrap",
	.isolated = true,
	.status_fd = true,
	.own_processes = 2, /* bwrap, and its init in the PID namespace */
	.open = bwrap_open,
	.close = bwrap_close,
	.wrap = bwrap_wrap,
};
