/*
 * cleanup.c -- removing the directories a session made, and reclaiming the
 * ones a killed supervisor left behind.
 *
 * A program in the sandbox chose what is in these trees: directories with
 * mode 000 or 0500, symbolic links to anywhere, FIFOs, sockets, chains
 * thousands deep.  So the walk never follows a link (every open is
 * O_NOFOLLOW relative to the directory it came from), never steps into
 * another mount (a mount point found inside is an error and stays), makes
 * directories writable before emptying them, and holds one directory open at
 * a time: it climbs back with "..", checking it arrives where it came from,
 * so the depth of the tree costs memory for names, never file descriptors.
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"

#ifndef STATX_MNT_ID
#define STATX_MNT_ID 0x00001000U
#endif

/* One directory on the way down: its name in its parent, and who it is. */
struct frame {
	char *name;
	dev_t dev;
	ino_t ino;
};

struct walk {
	struct frame *stack;
	size_t depth, cap;
	uint64_t mnt_id;      /* the mount the tree is on */
	bool have_mnt_id;
	const char *top;      /* the path asked for, for messages */
	sbx_error *err;
};

/*
 * The type of |name| in |dirfd| and the mount it is on: 0, with *has_id
 * false when the kernel cannot name the mount; or -errno.
 */
static int entry_info(int dirfd, const char *name, mode_t *mode, uint64_t *id, bool *has_id)
{
	struct statx sx;
	if (statx(dirfd, name, AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT, STATX_TYPE | STATX_MNT_ID,
	          &sx) < 0)
		return -errno;
	*mode = sx.stx_mode;
	*has_id = (sx.stx_mask & STATX_MNT_ID) != 0;
	*id = sx.stx_mnt_id;
	return 0;
}

/* "TOP/a/b/NAME" for a message, cut short when it does not fit. */
static const char *where(const struct walk *w, const char *name, char *buf, size_t size)
{
	size_t len = (size_t)snprintf(buf, size, "%s", w->top);
	for (size_t i = 1; i < w->depth && len < size; i++)
		len += (size_t)snprintf(buf + len, size - len, "/%s", w->stack[i].name);
	if (name && len < size)
		snprintf(buf + len, size - len, "/%s", name);
	return buf;
}

static int fail(struct walk *w, int e, const char *name, const char *what)
{
	char path[PATH_MAX];
	return sbx__error(w->err, -e, "could not remove '%s': %s: %s",
	                  where(w, name, path, sizeof path), what, strerrordesc_np(e));
}

/*
 * Opens directory |name| in |dirfd| for emptying: made readable, writable
 * and searchable by its owner first when it was not.  The chmod does not
 * follow links (glibc does it through an O_PATH descriptor).
 */
static int open_dir(int dirfd, const char *name)
{
	int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 && errno == EACCES) {
		if (fchmodat(dirfd, name, S_IRWXU, AT_SYMLINK_NOFOLLOW) < 0)
			return -1;
		fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	}
	if (fd >= 0) {
		struct stat st;
		if (fstat(fd, &st) == 0 && (st.st_mode & S_IRWXU) != S_IRWXU)
			fchmod(fd, st.st_mode | S_IRWXU);
	}
	return fd;
}

static int push(struct walk *w, const char *name, int fd)
{
	struct stat st;
	if (fstat(fd, &st) < 0)
		return -errno;
	if (w->depth == w->cap) {
		size_t cap = w->cap ? w->cap * 2 : 64;
		struct frame *s = realloc(w->stack, cap * sizeof *s);
		if (!s)
			return -ENOMEM;
		w->stack = s;
		w->cap = cap;
	}
	char *copy = strdup(name);
	if (!copy)
		return -ENOMEM;
	w->stack[w->depth++] = (struct frame){copy, st.st_dev, st.st_ino};
	return 0;
}

/* Removes one entry that is not a directory. */
static int unlink_entry(struct walk *w, int dirfd, const char *name)
{
	if (unlinkat(dirfd, name, 0) == 0 || errno == ENOENT)
		return 0;
	return fail(w, errno, name, "unlink");
}

/*
 * Empties and removes directory |name| in |topfd|.  Returns 0, or a negative
 * code with the path in the error.
 */
static int remove_dir(struct walk *w, int topfd, const char *name)
{
	mode_t mode;
	int rc, fd;

	if ((rc = entry_info(topfd, name, &mode, &w->mnt_id, &w->have_mnt_id)) < 0)
		return rc == -ENOENT ? 0 : fail(w, -rc, NULL, "stat");
	if ((fd = open_dir(topfd, name)) < 0)
		return errno == ENOENT ? 0 : fail(w, errno, NULL, "open");
	if ((rc = push(w, name, fd)) < 0) {
		close(fd);
		return sbx__error(w->err, rc, "out of memory removing '%s'", w->top);
	}
	DIR *d = fdopendir(fd);
	if (!d) {
		close(fd);
		return fail(w, errno, NULL, "read");
	}
	unsigned removed = 0;   /* in this pass over the current directory */
	for (;;) {
		errno = 0;
		struct dirent *e = readdir(d);
		if (!e && errno) {
			rc = fail(w, errno, NULL, "read");
			goto out;
		}
		if (e) {
			if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
				continue;
			uint64_t id = 0;
			bool has_id = false;
			if ((rc = entry_info(dirfd(d), e->d_name, &mode, &id, &has_id)) == -ENOENT)
				continue;
			if (rc < 0) {
				rc = fail(w, -rc, e->d_name, "stat");
				goto out;
			}
			if (!S_ISDIR(mode)) {
				if ((rc = unlink_entry(w, dirfd(d), e->d_name)) < 0)
					goto out;
				removed++;
				continue;
			}
			if (w->have_mnt_id && has_id && id != w->mnt_id) {
				rc = fail(w, EXDEV, e->d_name, "another filesystem is mounted there");
				goto out;
			}
			/* Down one level: only the child stays open. */
			int child = open_dir(dirfd(d), e->d_name);
			if (child < 0) {
				rc = fail(w, errno, e->d_name, "open");
				goto out;
			}
			if ((rc = push(w, e->d_name, child)) < 0) {
				close(child);
				closedir(d);
				return sbx__error(w->err, rc, "out of memory removing '%s'", w->top);
			}
			closedir(d);
			if (!(d = fdopendir(child))) {
				close(child);
				return fail(w, errno, NULL, "read");
			}
			removed = 0;
			continue;
		}
		/* The end of a pass.  Entries removed while reading may have hidden
		 * others from readdir(); read again until a pass finds nothing. */
		if (removed) {
			rewinddir(d);
			removed = 0;
			continue;
		}
		struct frame *f = &w->stack[w->depth - 1];
		if (w->depth == 1) {
			closedir(d);
			if (unlinkat(topfd, f->name, AT_REMOVEDIR) < 0 && errno != ENOENT)
				return fail(w, errno, NULL, "rmdir");
			return 0;
		}
		/* Up one level, making sure ".." is the directory we came down from. */
		int up = openat(dirfd(d), "..", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		struct stat st;
		closedir(d);
		if (up < 0 || fstat(up, &st) < 0 || st.st_dev != f[-1].dev || st.st_ino != f[-1].ino) {
			if (up >= 0)
				close(up);
			return fail(w, ESTALE, NULL, "the directory was moved while it was being removed");
		}
		char *child_name = f->name;
		w->depth--;
		if (unlinkat(up, child_name, AT_REMOVEDIR) < 0 && errno != ENOENT) {
			rc = fail(w, errno, child_name, "rmdir");
			free(child_name);
			close(up);
			return rc;
		}
		free(child_name);
		if (!(d = fdopendir(up))) {
			close(up);
			return fail(w, errno, NULL, "read");
		}
		removed = 1;
	}
out:
	/* The message is made before closedir(), which frees the entry's name. */
	closedir(d);
	return rc;
}

int sbx__remove_tree(const char *path, sbx_error *err)
{
	struct walk w = {.top = path, .err = err};
	char *copy = strdup(path);
	if (!copy)
		return sbx__error(err, -ENOMEM, "out of memory removing '%s'", path);
	char *slash = strrchr(copy, '/');
	const char *name = slash ? slash + 1 : copy;
	const char *parent = !slash ? "." : slash == copy ? "/" : copy;
	if (slash)
		*slash = '\0';
	int rc;
	int pfd = open(parent, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (pfd < 0) {
		rc = errno == ENOENT ? 0 : sbx__error(err, -errno, "could not remove '%s': %s", path,
		                                        strerrordesc_np(errno));
	} else {
		struct stat st;
		if (fstatat(pfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			rc = errno == ENOENT ? 0 : fail(&w, errno, NULL, "stat");
		else if (!S_ISDIR(st.st_mode))
			rc = unlinkat(pfd, name, 0) == 0 ? 0 : fail(&w, errno, NULL, "unlink");
		else
			rc = remove_dir(&w, pfd, name);
		close(pfd);
	}
	for (size_t i = 0; i < w.depth; i++)
		free(w.stack[i].name);
	free(w.stack);
	free(copy);
	return rc;
}

/* ------------------------------------------------------------- reclaiming */

/* The pid in a session directory's name "sbx-PID-XXXXXX", or 0 when it is not one. */
static pid_t session_pid(const char *name)
{
	if (strncmp(name, "sbx-", 4) != 0 || !isdigit((unsigned char)name[4]))
		return 0;
	char *end;
	long pid = strtol(name + 4, &end, 10);
	if (*end != '-' || pid <= 0 || pid > (1L << 22) || strlen(end + 1) != 6)
		return 0;
	for (const char *c = end + 1; *c; c++) {
		if (!isalnum((unsigned char)*c))
			return 0;
	}
	return (pid_t)pid;
}

/*
 * Whether the session that made |name| in |dirfd| is gone: its process is
 * gone, and nobody holds the lock file inside (a live session holds it, so
 * a reused pid or another pid namespace cannot fool us).
 */
static bool session_gone(int dirfd, const char *name, pid_t pid)
{
	if (kill(pid, 0) == 0 || errno != ESRCH)
		return false;
	char lock[NAME_MAX + 16];
	snprintf(lock, sizeof lock, "%s/" SBX__SESSION_LOCK, name);
	int fd = openat(dirfd, lock, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return errno == ENOENT;
	bool free_ = flock(fd, LOCK_EX | LOCK_NB) == 0;
	close(fd);
	return free_;
}

unsigned sbx__reclaim_sessions(const char *tmpdir)
{
	unsigned reclaimed = 0;
	DIR *d = opendir(tmpdir);
	if (!d)
		return 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		pid_t pid = session_pid(e->d_name);
		struct stat st;
		if (!pid || fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
		    !S_ISDIR(st.st_mode) || st.st_uid != geteuid() ||
		    !session_gone(dirfd(d), e->d_name, pid))
			continue;
		char path[PATH_MAX];
		if ((size_t)snprintf(path, sizeof path, "%s/%s", tmpdir, e->d_name) < sizeof path &&
		    sbx__remove_tree(path, NULL) == 0)
			reclaimed++;
	}
	closedir(d);
	return reclaimed;
}
