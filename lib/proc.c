/*
 * proc.c -- find and end a process tree without a PID namespace.
 *
 * The passthrough backend has no namespace to tear down, so a tree is found
 * by parent links in /proc.  A process can fork while we walk, and a child
 * whose parent dies is re-parented away from the tree and lost to us.  So
 * every process found is first stopped (SIGSTOP: a stopped process cannot
 * fork or exit on its own), the walk repeats until it finds nothing new, and
 * only then is the whole set killed.  Signals go through pidfds opened while
 * the process was known to be in the tree, so a pid recycled in between is
 * never hit.
 *
 * The walk reads each member's /proc/PID/task/TID/children, which costs the
 * size of the tree.  Kernels without those files (CONFIG_PROC_CHILDREN) get
 * a scan of every process's parent in /proc instead, which costs the size of
 * the machine for each tree: freeing thousands of runs at once was quadratic
 * that way.
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "internal.h"

struct member {
	pid_t pid;
	int pidfd;
};

struct tree {
	struct member *m;
	size_t n, cap;
};

/* Signals through the pidfd; without one (no pidfd support), by pid, which
 * is safe for an unreaped child of ours and a small race for the others. */
static void signal_member(const struct member *m, int sig)
{
	if (m->pidfd < 0 || syscall(SYS_pidfd_send_signal, m->pidfd, sig, NULL, 0) < 0)
		kill(m->pid, sig);
}

int sbx__wait_exit(pid_t pid, int pidfd, int timeout_ms)
{
	if (pidfd >= 0) {
		struct pollfd p = { .fd = pidfd, .events = POLLIN };
		int n;
		do
			n = poll(&p, 1, timeout_ms);
		while (n < 0 && errno == EINTR);
		return n > 0;
	}
	for (int waited = 0; waited <= timeout_ms; waited += 5) {
		if (sbx__exited(pid))
			return 1;
		usleep(5000);
	}
	return 0;
}

bool sbx__exited(pid_t pid)
{
	siginfo_t info;
	memset(&info, 0, sizeof info);
	if (waitid(P_PID, (id_t)pid, &info, WEXITED | WNOHANG | WNOWAIT) < 0)
		return errno == ECHILD;
	return info.si_pid == pid;
}

/* The parent of the process whose /proc directory is |dir| (relative to
 * the directory fd |proc|), from its stat file; or -1. */
static pid_t parent_of(int proc, const char *dir)
{
	char path[64], buf[512];
	snprintf(path, sizeof path, "%s/stat", dir);
	int fd = openat(proc, path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	/* The command name may hold spaces and parentheses: skip to the last ')'. */
	char *p = strrchr(buf, ')');
	if (!p)
		return -1;
	char state;
	int ppid;
	if (sscanf(p + 1, " %c %d", &state, &ppid) != 2)
		return -1;
	return ppid;
}

pid_t sbx__parent_of(pid_t pid)
{
	char dir[32];
	snprintf(dir, sizeof dir, "/proc/%d", (int)pid);
	return parent_of(AT_FDCWD, dir);
}

long sbx__user_tasks(uid_t uid)
{
	DIR *d = opendir("/proc");
	if (!d)
		return 0;
	long tasks = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		if (!isdigit((unsigned char)e->d_name[0]))
			continue;
		char path[300], buf[2048];
		snprintf(path, sizeof path, "%s/status", e->d_name);
		int fd = openat(dirfd(d), path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		ssize_t n = read(fd, buf, sizeof buf - 1);
		close(fd);
		if (n <= 0)
			continue;
		buf[n] = '\0';
		const char *u = strstr(buf, "\nUid:");
		const char *t = strstr(buf, "\nThreads:");
		if (u && t && (uid_t)strtoul(u + 6, NULL, 10) == uid)
			tasks += strtol(t + 9, NULL, 10);
	}
	closedir(d);
	return tasks;
}

static bool in_tree(const struct tree *t, pid_t pid)
{
	for (size_t i = 0; i < t->n; i++)
		if (t->m[i].pid == pid)
			return true;
	return false;
}

static int add_member(struct tree *t, pid_t pid, pid_t ppid);

/* One pass over /proc: stops and adds every process whose parent is in the
 * tree.  Returns how many were added. */
static size_t walk_once(struct tree *t)
{
	DIR *d = opendir("/proc");
	if (!d)
		return 0;
	size_t added = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		if (!isdigit((unsigned char)e->d_name[0]))
			continue;
		pid_t pid = (pid_t)atoi(e->d_name);
		if (in_tree(t, pid))
			continue;
		pid_t ppid = parent_of(dirfd(d), e->d_name);
		if (ppid <= 0 || !in_tree(t, ppid))
			continue;
		added += (size_t)add_member(t, pid, ppid);
	}
	closedir(d);
	return added;
}

/* Adds |pid|, stopped, if it is still |ppid|'s child once we hold a pidfd:
 * 1 when added, 0 when not (gone, or not the child any more, or out of
 * memory: then the process group kill is what is left). */
static int add_member(struct tree *t, pid_t pid, pid_t ppid)
{
	char dir[32];
	snprintf(dir, sizeof dir, "/proc/%d", (int)pid);
	int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (pidfd < 0 && errno != ENOSYS)
		return 0;
	/* Only now is the pidfd known to be the process we read about. */
	if (parent_of(AT_FDCWD, dir) != ppid) {
		if (pidfd >= 0)
			close(pidfd);
		return 0;
	}
	if (t->n == t->cap) {
		size_t cap = t->cap ? 2 * t->cap : 16;
		struct member *m = realloc(t->m, cap * sizeof *m);
		if (!m) {
			if (pidfd >= 0)
				close(pidfd);
			return 0;
		}
		t->m = m;
		t->cap = cap;
	}
	t->m[t->n] = (struct member){ pid, pidfd };
	signal_member(&t->m[t->n++], SIGSTOP);
	return 1;
}

/* The whole of |fd| as a string (malloc'd), or NULL. */
static char *read_all(int fd)
{
	size_t len = 0, cap = 512;
	char *buf = malloc(cap);
	ssize_t n;
	while (buf && (n = read(fd, buf + len, cap - len - 1)) > 0) {
		len += (size_t)n;
		if (cap - len - 1 == 0) {
			char *more = realloc(buf, cap * 2);
			if (!more) {
				free(buf);
				return NULL;
			}
			buf = more;
			cap *= 2;
		}
	}
	if (buf)
		buf[len] = '\0';
	return buf;
}

/*
 * One pass through the children files of every member: adds, stopped, the
 * children not yet in the tree.  Returns how many were added, or -1 when
 * this kernel has no children files.
 */
static ssize_t walk_children(struct tree *t)
{
	ssize_t added = 0;
	for (size_t i = 0; i < t->n; i++) {
		char path[64];
		pid_t parent = t->m[i].pid;
		snprintf(path, sizeof path, "/proc/%d/task", (int)parent);
		DIR *d = opendir(path);
		if (!d)
			continue;   /* gone already */
		struct dirent *e;
		while ((e = readdir(d))) {
			if (!isdigit((unsigned char)e->d_name[0]))
				continue;
			char file[300];
			snprintf(file, sizeof file, "%s/children", e->d_name);
			int fd = openat(dirfd(d), file, O_RDONLY | O_CLOEXEC);
			if (fd < 0) {
				if (errno == ENOENT && i == 0 && added == 0) {
					closedir(d);
					return -1;
				}
				continue;
			}
			char *list = read_all(fd);
			close(fd);
			char *p = list, *end;
			for (long child; p && (child = strtol(p, &end, 10), end != p); p = end) {
				if (child > 0 && !in_tree(t, (pid_t)child))
					added += add_member(t, (pid_t)child, parent);
			}
			free(list);
		}
		closedir(d);
	}
	return added;
}

bool sbx__proc_scan_only;

void sbx__kill_tree(pid_t pid, int pidfd)
{
	struct member root = { pid, pidfd };
	struct tree t = {0};
	signal_member(&root, SIGSTOP);
	t.m = malloc(16 * sizeof *t.m);
	if (t.m) {
		t.m[0] = root;
		t.n = 1;
		t.cap = 16;
		/* A stopped tree cannot grow, so a few passes find everything;
		 * the bound only guards against a bug. */
		ssize_t added = sbx__proc_scan_only ? -1 : walk_children(&t);
		for (int pass = 0; pass < 64 && added > 0; pass++)
			added = walk_children(&t);
		if (added < 0) {
			for (int pass = 0; pass < 64 && walk_once(&t) > 0; pass++)
				;
		}
	}
	signal_member(&root, SIGKILL);
	for (size_t i = 1; i < t.n; i++) {
		signal_member(&t.m[i], SIGKILL);
		if (t.m[i].pidfd >= 0)
			close(t.m[i].pidfd);
	}
	/* The group as well: it holds members we may have missed, and while the
	 * leader is unreaped its id cannot name anyone else's group. */
	kill(-pid, SIGKILL);
	free(t.m);
}
