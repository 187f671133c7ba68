/*
 * cgroup.c -- a cgroup per run, on cgroup v2 or v1 (see cgroup.h).
 *
 * Where.  Run cgroups are made directly below this process's own cgroup in
 * each hierarchy and nowhere else: on v2 one directory, on v1 one per
 * controller used, plus one in cpuacct for the cpu time when that hierarchy
 * is mounted apart from cpu.  Their names are "sbx-PID-SEQ" with the
 * supervisor's pid, so that sbx__cg_reclaim() can tell a leftover of a dead
 * supervisor from everything else, which it leaves alone: other programs
 * make cgroups next to ours.
 *
 * Ending a tree.  v2 since Linux 5.14 has cgroup.kill, which the kernel
 * applies to every member, even one that is forking at that moment.
 * Elsewhere we read cgroup.procs and SIGKILL what it lists, round after
 * round, until it lists nothing.  A listed process can exit, be reaped by
 * init and have its pid reused by a process outside the cgroup before our
 * signal lands (pid_max is often 32768), so each pid is first pinned with a
 * pidfd, and signalled only if cgroup.procs, read again after the pidfd was
 * opened, still lists it: no two live processes share a pid, so a pidfd
 * whose process is alive and whose pid the cgroup lists is that member.
 *
 * The child.  sbx__cg_enter() runs between vfork and exec, in memory it
 * shares with the supervisor, so it only opens, writes and closes paths
 * that sbx__cg_create() prepared.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"
#include "cgroup.h"

/* The v1 hierarchies, by slot; also how /proc/self/cgroup names them. */
static const char *const slot_name[SBX__CG_NDIR] = { "memory", "pids", "cpu", "cpuacct" };

/* The cpu.max and cfs period, in microseconds, and the smallest quota the
 * kernel accepts (1 ms). */
#define CPU_PERIOD 100000
#define CPU_MIN_QUOTA 1000

/* Rounds of reading cgroup.procs and killing what it lists before giving
 * up on a process that will not die (one stuck in the kernel, say). */
#define KILL_ROUNDS 32
/* How long destroy and reclaim wait for a killed cgroup to empty. */
#define DRAIN_MS 500
/* How deep below a run's directory sub-cgroups are looked for. */
#define MAX_DEPTH 8
/* Pids pinned with pidfds at once while killing. */
#define PIN_CHUNK 64

/* -------------------------------------------------------------- files */

/* |dir|/|file| into |out|, or -ENAMETOOLONG. */
static int path_in(char out[PATH_MAX], const char *dir, const char *file)
{
	int n = snprintf(out, PATH_MAX, "%s/%s", dir, file);
	return n < 0 || n >= PATH_MAX ? -ENAMETOOLONG : 0;
}

static bool has_file(const char *dir, const char *file)
{
	char p[PATH_MAX];
	return path_in(p, dir, file) == 0 && access(p, F_OK) == 0;
}

static bool is_dir(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* Reads |dir|/|file| (at most size - 1 bytes, enough for every small
 * interface file we read) NUL-terminated: its length, or -errno. */
static ssize_t read_small(const char *dir, const char *file, char *buf, size_t size)
{
	char p[PATH_MAX];
	int r = path_in(p, dir, file);
	if (r < 0)
		return r;
	int fd = open(p, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	size_t len = 0;
	while (len < size - 1) {
		ssize_t n = read(fd, buf + len, size - 1 - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			r = -errno;
			close(fd);
			return r;
		}
		if (n == 0)
			break;
		len += (size_t)n;
	}
	close(fd);
	buf[len] = '\0';
	return (ssize_t)len;
}

/* Writes |value| to |dir|/|file|: 0 or -errno.  The file is never created:
 * on a cgroup file system the kernel makes every interface file, and one
 * that is missing means the controller is not there. */
static int write_value(const char *dir, const char *file, const char *value)
{
	char p[PATH_MAX];
	int r = path_in(p, dir, file);
	if (r < 0)
		return r;
	int fd = open(p, O_WRONLY | O_TRUNC | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	size_t len = strlen(value);
	ssize_t n;
	do
		n = write(fd, value, len);
	while (n < 0 && errno == EINTR);
	/* cgroup files take or refuse a value in write(); close() adds nothing. */
	r = n < 0 ? -errno : (size_t)n != len ? -EIO : 0;
	close(fd);
	return r;
}

/* A decimal number at |s|, or -1 ("max", garbage, overflow). */
static int64_t parse_num(const char *s)
{
	char *end;
	errno = 0;
	long long v = strtoll(s, &end, 10);
	if (end == s || errno || v < 0 || (*end != '\0' && *end != '\n' && *end != ' '))
		return -1;
	return (int64_t)v;
}

/* The number after "|key| " at the start of a line of |text|, or -1. */
static int64_t key_value(const char *text, const char *key)
{
	size_t klen = strlen(key);
	for (const char *line = text; line && *line;) {
		if (strncmp(line, key, klen) == 0 && line[klen] == ' ')
			return parse_num(line + klen + 1);
		line = strchr(line, '\n');
		if (line)
			line++;
	}
	return -1;
}

/* The number in |dir|/|file|, or -1. */
static int64_t read_num(const char *dir, const char *file)
{
	char buf[64];
	return read_small(dir, file, buf, sizeof buf) > 0 ? parse_num(buf) : -1;
}

/* The number after |key| in |dir|/|file|, or -1. */
static int64_t read_key(const char *dir, const char *file, const char *key)
{
	char buf[4096];
	return read_small(dir, file, buf, sizeof buf) > 0 ? key_value(buf, key) : -1;
}

/* ------------------------------------------------------------ pid lists */

struct pids {
	pid_t *v;
	size_t n, cap;
};

static int pids_add(struct pids *p, pid_t pid)
{
	if (p->n == p->cap) {
		size_t cap = p->cap ? 2 * p->cap : 64;
		pid_t *v = realloc(p->v, cap * sizeof *v);
		if (!v)
			return -ENOMEM;
		p->v = v;
		p->cap = cap;
	}
	p->v[p->n++] = pid;
	return 0;
}

static int pid_cmp(const void *a, const void *b)
{
	pid_t x = *(const pid_t *)a, y = *(const pid_t *)b;
	return (x > y) - (x < y);
}

/* Replaces |out| with the pids |dir|/cgroup.procs lists, sorted.  A
 * directory that is gone lists nothing.  0 or -errno. */
static int read_procs(const char *dir, struct pids *out)
{
	char p[PATH_MAX], buf[4096];
	int r = path_in(p, dir, "cgroup.procs");
	out->n = 0;
	if (r < 0)
		return r;
	int fd = open(p, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? 0 : -errno;
	long cur = -1;
	for (;;) {
		ssize_t n = read(fd, buf, sizeof buf);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			r = -errno;
			break;
		}
		if (n == 0)
			break;
		/* A number may be split between two reads: |cur| carries it. */
		for (ssize_t i = 0; i < n && r == 0; i++) {
			if (buf[i] >= '0' && buf[i] <= '9') {
				cur = (cur < 0 ? 0 : cur) * 10 + (buf[i] - '0');
				if (cur > INT_MAX)
					cur = INT_MAX;
			} else if (cur >= 0) {
				if (cur > 0)
					r = pids_add(out, (pid_t)cur);
				cur = -1;
			}
		}
		if (r < 0)
			break;
	}
	if (r == 0 && cur > 0)
		r = pids_add(out, (pid_t)cur);
	close(fd);
	if (r == 0 && out->n > 1)
		qsort(out->v, out->n, sizeof *out->v, pid_cmp);
	return r;
}

static bool pids_has(const struct pids *p, pid_t pid)
{
	return p->n > 0 && bsearch(&pid, p->v, p->n, sizeof *p->v, pid_cmp) != NULL;
}

/* Whether |dir|/cgroup.procs lists anyone: its first bytes tell. */
static bool has_procs(const char *dir)
{
	char buf[32];
	ssize_t n = read_small(dir, "cgroup.procs", buf, sizeof buf);
	for (ssize_t i = 0; i < n; i++)
		if (buf[i] >= '0' && buf[i] <= '9')
			return true;
	return false;
}

/* --------------------------------------------------------------- killing */

/*
 * Signals every process |dir|/cgroup.procs lists with SIGKILL, pinning
 * each with a pidfd first (see the top of the file), and appends the pids
 * it saw to |seen|.  |a| and |b| are scratch lists.  0 or -errno.
 */
static int kill_listed(const char *dir, struct pids *seen, struct pids *a, struct pids *b)
{
	int r = read_procs(dir, a);
	if (r < 0 || a->n == 0)
		return r;
	for (size_t i = 0; i < a->n; i += PIN_CHUNK) {
		size_t m = a->n - i < PIN_CHUNK ? a->n - i : PIN_CHUNK;
		int fd[PIN_CHUNK], err[PIN_CHUNK];
		for (size_t j = 0; j < m; j++) {
			fd[j] = (int)syscall(SYS_pidfd_open, a->v[i + j], 0);
			err[j] = fd[j] < 0 ? errno : 0;
		}
		r = read_procs(dir, b);
		for (size_t j = 0; j < m; j++) {
			pid_t pid = a->v[i + j];
			if (r == 0 && pids_has(b, pid)) {
				if (fd[j] >= 0)
					syscall(SYS_pidfd_send_signal, fd[j], SIGKILL, NULL, 0);
				else if (err[j] != ESRCH)
					/* No pidfd (a kernel before 5.3, or out of fds): by
					 * pid, with the small race the pidfd closes. */
					kill(pid, SIGKILL);
			}
			if (fd[j] >= 0)
				close(fd[j]);
		}
		if (r < 0)
			return r;
	}
	for (size_t i = 0; i < a->n && r == 0; i++)
		r = pids_add(seen, a->v[i]);
	return r;
}

/* Calls |fn| on every directory below |dir| (not |dir| itself), deepest
 * first, up to MAX_DEPTH levels.  A run's directory has none unless a
 * process inside made some, which only root outside a sandbox can. */
static void each_subdir(const char *dir, int depth, void (*fn)(const char *, void *), void *arg)
{
	if (depth >= MAX_DEPTH)
		return;
	DIR *d = opendir(dir);
	if (!d)
		return;
	struct dirent *e;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		if (e->d_type != DT_DIR && e->d_type != DT_UNKNOWN)
			continue;
		char sub[PATH_MAX];
		if (path_in(sub, dir, e->d_name) < 0 || !is_dir(sub))
			continue;
		each_subdir(sub, depth + 1, fn, arg);
		fn(sub, arg);
	}
	closedir(d);
}

struct kill_pass {
	struct pids seen, a, b;
	int err; /* the first -errno */
};

static void kill_pass_dir(const char *dir, void *arg)
{
	struct kill_pass *k = arg;
	int r = kill_listed(dir, &k->seen, &k->a, &k->b);
	if (r < 0 && k->err == 0)
		k->err = r;
}

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/*
 * Kills what |dirs| (and directories below them) hold, round after round.
 * A killed process stays listed until it has exited, which can take a
 * while (one throttled by its cpu quota waits for the next period), so the
 * rounds end not when the list is empty but when it names nobody the round
 * before did not: everyone listed has been sent SIGKILL, and a process with
 * SIGKILL pending cannot fork.  0; -EBUSY when new processes still appeared
 * after KILL_ROUNDS; or the -errno of a cgroup.procs that could not be read.
 */
static int kill_loop(char *const *dirs, size_t ndirs)
{
	struct kill_pass k = {0};
	struct pids prev = {0};
	int r = -EBUSY;
	for (int round = 0; round < KILL_ROUNDS; round++) {
		k.seen.n = 0;
		for (size_t i = 0; i < ndirs; i++) {
			if (!dirs[i])
				continue;
			each_subdir(dirs[i], 0, kill_pass_dir, &k);
			kill_pass_dir(dirs[i], &k);
		}
		if (k.err < 0) {
			r = k.err;
			break;
		}
		bool fresh = false;
		for (size_t i = 0; i < k.seen.n && !fresh; i++)
			fresh = round == 0 || !pids_has(&prev, k.seen.v[i]);
		if (!fresh) {
			r = 0;
			break;
		}
		struct pids t = prev;
		prev = k.seen;
		k.seen = t;
		if (prev.n > 1)
			qsort(prev.v, prev.n, sizeof *prev.v, pid_cmp);
		/* Give the killed a moment to exit rather than spin. */
		sleep_ms(1);
	}
	free(prev.v);
	free(k.seen.v);
	free(k.a.v);
	free(k.b.v);
	return r;
}

/* ----------------------------------------------------------------- probe */

/* Appends a sentence to caps->why, "; " between two, cut if it is full. */
__attribute__((format(printf, 2, 3)))
static void why_add(struct sbx__cg_caps *caps, const char *fmt, ...)
{
	size_t len = strlen(caps->why);
	if (len + 3 >= sizeof caps->why)
		return;
	if (len > 0) {
		memcpy(caps->why + len, "; ", 3);
		len += 2;
	}
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(caps->why + len, sizeof caps->why - len, fmt, ap);
	va_end(ap);
}

/* What /proc/self/cgroup says of this process. */
struct self_paths {
	char *v2;                    /* the "0::" line's path, or NULL */
	char *v1[SBX__CG_NDIR];      /* each v1 slot's path, or NULL */
	char *mount[SBX__CG_NDIR];   /* its hierarchy's controllers, "cpu,cpuacct" */
};

static void self_paths_free(struct self_paths *sp)
{
	free(sp->v2);
	for (int i = 0; i < SBX__CG_NDIR; i++) {
		free(sp->v1[i]);
		free(sp->mount[i]);
	}
}

/* Whether |path| is one we can use: absolute, and inside our cgroup
 * namespace (a cgroup outside it shows as "/../..."). */
static bool path_ok(const char *path)
{
	return path[0] == '/' && strstr(path, "/..") == NULL;
}

/* Parses lines "ID:CONTROLLERS:PATH" of |self|; 0 or -errno. */
static int read_self(const char *self, struct self_paths *sp)
{
	char buf[8192];
	memset(sp, 0, sizeof *sp);
	int fd = open(self, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	size_t len = 0;
	for (;;) {
		ssize_t n = read(fd, buf + len, sizeof buf - 1 - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		len += (size_t)n;
		if (len == sizeof buf - 1)
			break;
	}
	close(fd);
	buf[len] = '\0';

	char *save = NULL;
	for (char *line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char *c1 = strchr(line, ':');
		char *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
		if (!c2)
			continue;
		*c1 = *c2 = '\0';
		const char *id = line, *ctrls = c1 + 1, *path = c2 + 1;
		if (ctrls[0] == '\0') {
			if (strcmp(id, "0") == 0 && !sp->v2 && !(sp->v2 = strdup(path)))
				return -ENOMEM;
			continue;
		}
		/* Each comma-separated controller of the line. */
		for (int i = 0; i < SBX__CG_NDIR; i++) {
			size_t nl = strlen(slot_name[i]);
			for (const char *t = ctrls; t; t = strchr(t, ',') ? strchr(t, ',') + 1 : NULL) {
				if (strncmp(t, slot_name[i], nl) != 0 || (t[nl] != ',' && t[nl] != '\0'))
					continue;
				if (sp->v1[i])
					break;
				if (!(sp->v1[i] = strdup(path)) || !(sp->mount[i] = strdup(ctrls)))
					return -ENOMEM;
				break;
			}
		}
	}
	return 0;
}

/* |base| followed by the cgroup path |path| ("/" adds nothing); NULL: ENOMEM. */
static char *cg_path(const char *base, const char *path)
{
	char *out;
	if (asprintf(&out, "%s%s", base, strcmp(path, "/") == 0 ? "" : path) < 0)
		return NULL;
	return out;
}

/* Why |dir| cannot take new cgroups, as a clause, or NULL when it can. */
static const char *unwritable(const char *dir, char *buf, size_t size)
{
	if (access(dir, W_OK) == 0)
		return NULL;
	int e = errno;
	if (e == EACCES && geteuid() != 0)
		snprintf(buf, size, "not root and %s is not writable", dir);
	else
		snprintf(buf, size, "%s is not writable: %s", dir, sbx_strerror(-e));
	return buf;
}

/* Whether a v2 directory with memory enabled can limit swap: its own
 * memory.swap.max says so, and the root cgroup, which has none, through
 * any child's. */
static bool v2_swap(const char *dir, bool is_root)
{
	if (!is_root)
		return has_file(dir, "memory.swap.max");
	DIR *d = opendir(dir);
	if (!d)
		return false;
	bool found = false;
	struct dirent *e;
	while (!found && (e = readdir(d))) {
		char sub[PATH_MAX];
		if (e->d_name[0] != '.' && path_in(sub, dir, e->d_name) == 0)
			found = has_file(sub, "memory.swap.max");
	}
	closedir(d);
	return found;
}

/* v2: usable when this process's cgroup has memory, pids and cpu in its
 * cgroup.subtree_control and we may make directories in it.  A non-root v2
 * cgroup cannot enable controllers for children while it holds processes,
 * so only a cgroup somebody prepared (or the root, which is exempt) passes;
 * we never enable them ourselves, which would be taking a delegation. */
static bool probe_v2(const char *root, const char *self, const struct self_paths *sp,
                     struct sbx__cg_caps *caps)
{
	char mount[PATH_MAX], text[PATH_MAX + 128];
	if (has_file(root, "cgroup.controllers"))
		snprintf(mount, sizeof mount, "%s", root);
	else if (path_in(mount, root, "unified") < 0 || !has_file(mount, "cgroup.controllers")) {
		why_add(caps, "no cgroup v2 hierarchy at %s or %s/unified", root, root);
		return false;
	}
	if (!sp->v2 || !path_ok(sp->v2)) {
		why_add(caps, "no cgroup v2: %s names no usable v2 cgroup for this process", self);
		return false;
	}
	char *dir = cg_path(mount, sp->v2);
	if (!dir) {
		why_add(caps, "no cgroup v2: out of memory");
		return false;
	}
	bool ok = false;
	char sub[512];
	if (!is_dir(dir)) {
		why_add(caps, "no cgroup v2: this process's cgroup directory %s does not exist", dir);
	} else if (read_small(dir, "cgroup.subtree_control", sub, sizeof sub) < 0) {
		why_add(caps, "no cgroup v2: cannot read %s/cgroup.subtree_control", dir);
	} else {
		/* Which of the three the subtree lacks. */
		static const char *const need[] = { "memory", "pids", "cpu" };
		char missing[64] = "";
		int nmissing = 0;
		for (size_t i = 0; i < SBX__ARRAY_LEN(need); i++) {
			bool found = false;
			size_t nl = strlen(need[i]);
			for (const char *t = sub; (t = strstr(t, need[i])); t += nl)
				if ((t == sub || t[-1] == ' ') &&
				    (t[nl] == ' ' || t[nl] == '\n' || t[nl] == '\0'))
					found = true;
			if (!found) {
				size_t l = strlen(missing);
				snprintf(missing + l, sizeof missing - l, "%s%s", l ? ", " : "", need[i]);
				nmissing++;
			}
		}
		const char *w;
		if (nmissing == (int)SBX__ARRAY_LEN(need))
			why_add(caps, "no delegated cgroup v2 subtree: this process's cgroup %s lists no "
			        "controllers in %s/cgroup.subtree_control", sp->v2, dir);
		else if (nmissing > 0)
			why_add(caps, "no delegated cgroup v2 subtree: %s/cgroup.subtree_control lacks %s "
			        "(memory, pids and cpu are all needed)", dir, missing);
		else if ((w = unwritable(dir, text, sizeof text)))
			why_add(caps, "no delegated cgroup v2 subtree: %s", w);
		else
			ok = true;
	}
	if (!ok) {
		free(dir);
		return false;
	}
	caps->version = SBX__CG_V2;
	for (int i = 0; i < SBX__CG_NCTRL; i++)
		caps->ctrl[i] = true;
	caps->memory_swap = v2_swap(dir, strcmp(sp->v2, "/") == 0);
	if (!caps->memory_swap)
		why_add(caps, "swap is not limited: %s has no memory.swap.max (the kernel does not "
		        "account swap)", dir);
	caps->parent[0] = dir;
	return true;
}

/* v1, slot by slot: usable when this process's cgroup in that hierarchy
 * exists and we may make directories in it. */
static void probe_v1(const char *root, const char *self, const struct self_paths *sp,
                     struct sbx__cg_caps *caps)
{
	char text[PATH_MAX + 128], reason[PATH_MAX + 160];
	/* Why cpuacct is not used matters only if v1 is: it is said last. */
	char acct[PATH_MAX + 160] = "";
	bool listed = false;
	for (int i = 0; i < SBX__CG_NDIR; i++)
		listed |= sp->v1[i] != NULL;
	if (!listed) {
		why_add(caps, "no cgroup v1: %s lists no memory, pids, cpu or cpuacct hierarchy", self);
		return;
	}
	for (int i = 0; i < SBX__CG_NDIR; i++) {
		/* cpuacct mounted with cpu is measured through cpu's directory. */
		if (i == SBX__CG_CPUACCT && sp->mount[i] && sp->mount[SBX__CG_CPU] &&
		    strcmp(sp->mount[i], sp->mount[SBX__CG_CPU]) == 0)
			continue;
		char *dir = NULL;
		const char *w;
		reason[0] = '\0';
		if (!sp->v1[i] || !path_ok(sp->v1[i])) {
			snprintf(reason, sizeof reason, "%s names no usable %s hierarchy for this "
			         "process", self, slot_name[i]);
		} else {
			/* The hierarchy is mounted at ROOT/NAME, or at ROOT/CONTROLLERS
			 * when several share it and nobody made the NAME link. */
			char mount[PATH_MAX];
			if (path_in(mount, root, slot_name[i]) < 0 ||
			    (!is_dir(mount) && path_in(mount, root, sp->mount[i]) < 0) ||
			    !(dir = cg_path(mount, sp->v1[i])))
				snprintf(reason, sizeof reason, "its path is too long");
			else if (!is_dir(dir))
				snprintf(reason, sizeof reason, "%s does not exist", dir);
			else if ((w = unwritable(dir, text, sizeof text)))
				snprintf(reason, sizeof reason, "%s", w);
			else if (i == SBX__CG_CPU && !has_file(dir, "cpu.cfs_quota_us"))
				snprintf(reason, sizeof reason, "%s has no cpu.cfs_quota_us (the kernel "
				         "lacks CFS bandwidth control)", dir);
		}
		if (reason[0]) {
			if (i == SBX__CG_CPUACCT)
				snprintf(acct, sizeof acct, "%s", reason);
			else
				why_add(caps, "no cgroup v1 %s: %s", slot_name[i], reason);
			free(dir);
			continue;
		}
		caps->parent[i] = dir;
		if (i < SBX__CG_NCTRL)
			caps->ctrl[i] = true;
		if (i == SBX__CG_MEMORY) {
			caps->memory_swap = has_file(dir, "memory.memsw.limit_in_bytes");
			if (!caps->memory_swap)
				why_add(caps, "swap is not limited: %s has no memory.memsw.limit_in_bytes "
				        "(boot with swapaccount=1)", dir);
		}
	}
	bool any = false;
	for (int i = 0; i < SBX__CG_NCTRL; i++)
		any |= caps->ctrl[i];
	if (any)
		caps->version = SBX__CG_V1;
	if (any && acct[0])
		why_add(caps, "cpu time is not measured by cgroup: %s", acct);
}

void sbx__cg_probe(const char *root, const char *self, struct sbx__cg_caps *caps)
{
	struct self_paths sp;
	memset(caps, 0, sizeof *caps);
	int r = read_self(self, &sp);
	if (r < 0) {
		why_add(caps, "no cgroup: cannot read %s: %s", self, sbx_strerror(r));
	} else if (!probe_v2(root, self, &sp, caps)) {
		probe_v1(root, self, &sp, caps);
		if (caps->version == SBX__CG_NONE) {
			/* Nothing usable: the v1 paths found are of no use either. */
			sbx__cg_caps_free(caps);
		}
	}
	self_paths_free(&sp);
}

void sbx__cg_caps_free(struct sbx__cg_caps *caps)
{
	for (int i = 0; i < SBX__CG_NDIR; i++) {
		free(caps->parent[i]);
		caps->parent[i] = NULL;
	}
}

/* ---------------------------------------------------------------- create */

/* Whether |name| can only name a directory right below the parent. */
static bool name_ok(const char *name)
{
	size_t len = strlen(name);
	return len > 0 && len < NAME_MAX && !strchr(name, '/') && !strstr(name, "..") &&
	       strcmp(name, ".") != 0;
}

/* Makes slot |i|'s directory |parent|/|name| and fills cg->dir[i] and
 * cg->procs[i]; 0 or a negative code with |err| filled. */
static int make_dir(struct sbx__cg *cg, int i, const char *parent, const char *name,
                    sbx_error *err)
{
	char *dir, *procs;
	int r = 0;
	if (asprintf(&dir, "%s/%s", parent, name) < 0)
		return sbx__error(err, -ENOMEM, "out of memory");
	if (asprintf(&procs, "%s/cgroup.procs", dir) < 0) {
		free(dir);
		return sbx__error(err, -ENOMEM, "out of memory");
	}
	if (strlen(procs) >= PATH_MAX) {
		free(procs);
		r = sbx__error(err, -ENAMETOOLONG, "cgroup path %s is too long", dir);
		free(dir);
		return r;
	}
	/* One that exists is taken over when it holds nobody: see
	 * sbx__cg_create() in cgroup.h. */
	if (mkdir(dir, 0755) < 0) {
		int e = errno;
		if (e != EEXIST)
			r = sbx__error(err, -e, "cannot make cgroup %s: %s", dir, sbx_strerror(-e));
		else if (!is_dir(dir))
			r = sbx__error(err, -EEXIST, "cannot make cgroup %s: a file of that name exists",
			               dir);
		else if (has_procs(dir))
			r = sbx__error(err, -EEXIST, "cannot make cgroup %s: it exists and holds "
			               "processes", dir);
	}
	if (r < 0) {
		free(dir);
		free(procs);
		return r;
	}
	cg->dir[i] = dir;
	cg->procs[i] = procs;
	return 0;
}

/* Writes |value| to slot |i|'s |file|; 0 or a negative code naming both. */
static int set(const struct sbx__cg *cg, int i, const char *file, const char *value,
               sbx_error *err)
{
	int r = write_value(cg->dir[i], file, value);
	if (r < 0) {
		int len = (int)strcspn(value, "\n");
		return sbx__error(err, r, "cannot write \"%.*s\" to %s/%s: %s", len, value, cg->dir[i],
		                  file, sbx_strerror(r));
	}
	return 0;
}

/* Removes the directories of |cg| (which hold nobody yet) and frees it. */
static void undo(struct sbx__cg *cg)
{
	for (int i = SBX__CG_NDIR - 1; i >= 0; i--) {
		if (cg->dir[i])
			rmdir(cg->dir[i]);
		free(cg->dir[i]);
		free(cg->procs[i]);
	}
	memset(cg, 0, sizeof *cg);
}

static int create_v2(const struct sbx__cg_caps *caps, const char *name,
                     const struct sbx__cg_limits *lim, const char *quota, struct sbx__cg *cg,
                     sbx_error *err)
{
	char v[64];
	int r = make_dir(cg, 0, caps->parent[0], name, err);
	if (r < 0)
		return r;
	if (lim->memory) {
		snprintf(v, sizeof v, "%llu\n", (unsigned long long)lim->memory);
		if ((r = set(cg, 0, "memory.max", v, err)) < 0)
			return r;
		/* No swap at all: memory.max alone would let the run push the
		 * rest of its pages out to swap and go on. */
		if (has_file(cg->dir[0], "memory.swap.max") &&
		    (r = set(cg, 0, "memory.swap.max", "0\n", err)) < 0)
			return r;
	}
	if (lim->processes) {
		snprintf(v, sizeof v, "%llu\n", (unsigned long long)lim->processes);
		if ((r = set(cg, 0, "pids.max", v, err)) < 0)
			return r;
	}
	if (quota) {
		snprintf(v, sizeof v, "%s %d\n", quota, CPU_PERIOD);
		if ((r = set(cg, 0, "cpu.max", v, err)) < 0)
			return r;
	}
	return 0;
}

static int create_v1(const struct sbx__cg_caps *caps, const char *name,
                     const struct sbx__cg_limits *lim, const char *quota, struct sbx__cg *cg,
                     sbx_error *err)
{
	char v[64];
	int r;
	/* Memory is made even unlimited, for the peak; cpu when cpuacct shares
	 * its hierarchy, for the cpu time; the cpuacct slot always. */
	bool want[SBX__CG_NDIR] = {
		[SBX__CG_MEMORY] = caps->parent[SBX__CG_MEMORY] != NULL,
		[SBX__CG_PIDS] = lim->processes > 0,
		[SBX__CG_CPU] = quota || (caps->parent[SBX__CG_CPU] &&
		                          has_file(caps->parent[SBX__CG_CPU], "cpuacct.usage")),
		[SBX__CG_CPUACCT] = caps->parent[SBX__CG_CPUACCT] != NULL,
	};
	for (int i = 0; i < SBX__CG_NDIR; i++)
		if (want[i] && (r = make_dir(cg, i, caps->parent[i], name, err)) < 0)
			return r;
	if (lim->memory) {
		/* Memory plus swap gets the same figure: no swap beyond the limit.
		 * The kernel wants memsw >= the plain limit at every moment, so
		 * memsw goes last; and first to unlimited, which it is already in a
		 * new cgroup but may not be in one taken over. */
		snprintf(v, sizeof v, "%llu\n", (unsigned long long)lim->memory);
		if (caps->memory_swap &&
		    (r = set(cg, SBX__CG_MEMORY, "memory.memsw.limit_in_bytes", "-1\n", err)) < 0)
			return r;
		if ((r = set(cg, SBX__CG_MEMORY, "memory.limit_in_bytes", v, err)) < 0)
			return r;
		if (caps->memory_swap &&
		    (r = set(cg, SBX__CG_MEMORY, "memory.memsw.limit_in_bytes", v, err)) < 0)
			return r;
	}
	if (lim->processes) {
		snprintf(v, sizeof v, "%llu\n", (unsigned long long)lim->processes);
		if ((r = set(cg, SBX__CG_PIDS, "pids.max", v, err)) < 0)
			return r;
	}
	if (quota) {
		snprintf(v, sizeof v, "%d\n", CPU_PERIOD);
		if ((r = set(cg, SBX__CG_CPU, "cpu.cfs_period_us", v, err)) < 0)
			return r;
		snprintf(v, sizeof v, "%s\n", quota);
		if ((r = set(cg, SBX__CG_CPU, "cpu.cfs_quota_us", v, err)) < 0)
			return r;
	}
	return 0;
}

int sbx__cg_create(const struct sbx__cg_caps *caps, const char *name,
                   const struct sbx__cg_limits *lim, struct sbx__cg *cg, sbx_error *err)
{
	static const char *const what[SBX__CG_NCTRL] = { "memory", "processes", "cpus" };
	memset(cg, 0, sizeof *cg);
	if (!name_ok(name))
		return sbx__error(err, -EINVAL, "cgroup name \"%s\" is not a single path component",
		                  name);
	if (caps->version == SBX__CG_NONE)
		return sbx__error(err, -EOPNOTSUPP, "no usable cgroup: %s", caps->why);
	bool asked[SBX__CG_NCTRL] = { lim->memory > 0, lim->processes > 0, lim->cpus > 0 };
	for (int i = 0; i < SBX__CG_NCTRL; i++)
		if (asked[i] && !caps->ctrl[i])
			return sbx__error(err, -EOPNOTSUPP, "%s cannot be limited by a cgroup here: %s",
			                  what[i], caps->why);

	char quota[32], *q = NULL;
	if (lim->cpus > 0) {
		double us = lim->cpus * CPU_PERIOD;
		if (!(us >= CPU_MIN_QUOTA))
			return sbx__error(err, -EINVAL, "cpus %g is below the smallest share a cgroup "
			                  "can hold, %g of a core", lim->cpus,
			                  (double)CPU_MIN_QUOTA / CPU_PERIOD);
		if (us > 1e15)
			return sbx__error(err, -EINVAL, "cpus %g is too large", lim->cpus);
		snprintf(quota, sizeof quota, "%lld", (long long)(us + 0.5));
		q = quota;
	}

	cg->version = caps->version;
	int r = caps->version == SBX__CG_V2 ? create_v2(caps, name, lim, q, cg, err)
	                                    : create_v1(caps, name, lim, q, cg, err);
	if (r < 0)
		undo(cg);
	return r;
}

/* ----------------------------------------------------------------- enter */

SBX__CHILD_CODE int sbx__cg_enter(const struct sbx__cg *cg)
{
	/* In the vfork child: system calls on prepared paths, nothing else.
	 * "0" names the writer, so no pid has to be formatted. */
	for (int i = 0; i < SBX__CG_NDIR; i++) {
		if (!cg->procs[i])
			continue;
		int fd = open(cg->procs[i], O_WRONLY | O_CLOEXEC);
		if (fd < 0)
			return errno;
		ssize_t n;
		do
			n = write(fd, "0\n", 2);
		while (n < 0 && errno == EINTR);
		int e = n < 0 ? errno : 0;
		close(fd);
		if (e)
			return e;
	}
	return 0;
}

/* ----------------------------------------------------------------- stats */

int sbx__cg_stats(const struct sbx__cg *cg, struct sbx__cg_stats *st)
{
	char buf[4096];
	st->peak_memory = -1;
	st->oom_killed = false;
	st->pids_max = false;
	st->cpu_user = st->cpu_system = -1;

	if (cg->version == SBX__CG_V2 && cg->dir[0]) {
		const char *d = cg->dir[0];
		/* memory.peak came in Linux 5.19; before it the peak is unknown. */
		st->peak_memory = read_num(d, "memory.peak");
		st->oom_killed = read_key(d, "memory.events", "oom_kill") > 0;
		st->pids_max = read_key(d, "pids.events", "max") > 0;
		if (read_small(d, "cpu.stat", buf, sizeof buf) > 0) {
			int64_t u = key_value(buf, "user_usec"), s = key_value(buf, "system_usec");
			if (u >= 0 && s >= 0) {
				st->cpu_user = (double)u / 1e6;
				st->cpu_system = (double)s / 1e6;
			}
		}
		return 0;
	}
	if (cg->version != SBX__CG_V1)
		return 0;

	const char *mem = cg->dir[SBX__CG_MEMORY];
	if (mem) {
		/* With swap limited, memory+swap is what the limit counts. */
		int64_t peak = read_num(mem, "memory.max_usage_in_bytes");
		int64_t memsw = read_num(mem, "memory.memsw.max_usage_in_bytes");
		st->peak_memory = memsw > peak ? memsw : peak;
		int64_t kills = read_key(mem, "memory.oom_control", "oom_kill");
		/* Before Linux 4.13 there is no count of kills, only of the times
		 * the limit was reached, which reclaim may have coped with: a
		 * hint, and the best there is. */
		st->oom_killed = kills >= 0 ? kills > 0 : read_num(mem, "memory.failcnt") > 0;
	}
	if (cg->dir[SBX__CG_PIDS])
		st->pids_max = read_key(cg->dir[SBX__CG_PIDS], "pids.events", "max") > 0;

	const char *acct = cg->dir[SBX__CG_CPUACCT] ? cg->dir[SBX__CG_CPUACCT] : cg->dir[SBX__CG_CPU];
	if (acct) {
		int64_t u = read_num(acct, "cpuacct.usage_user");
		int64_t s = read_num(acct, "cpuacct.usage_sys");
		if (u >= 0 && s >= 0) {
			st->cpu_user = (double)u / 1e9;
			st->cpu_system = (double)s / 1e9;
		} else if (read_small(acct, "cpuacct.stat", buf, sizeof buf) > 0) {
			/* Before Linux 4.7: clock ticks. */
			long hz = sysconf(_SC_CLK_TCK);
			u = key_value(buf, "user");
			s = key_value(buf, "system");
			if (u >= 0 && s >= 0 && hz > 0) {
				st->cpu_user = (double)u / (double)hz;
				st->cpu_system = (double)s / (double)hz;
			}
		}
	}
	return 0;
}

/* ------------------------------------------------------------ kill, empty */

int sbx__cg_kill(const struct sbx__cg *cg)
{
	if (cg->version == SBX__CG_V2 && cg->dir[0]) {
		int r = write_value(cg->dir[0], "cgroup.kill", "1\n");
		if (r != -ENOENT)
			return r;
		/* Before Linux 5.14: by hand, like v1. */
	}
	return kill_loop(cg->dir, SBX__CG_NDIR);
}

/* Whether any directory below |dir| lists a process (each_subdir callback). */
static void any_procs(const char *dir, void *arg)
{
	bool *found = arg;
	if (!*found)
		*found = has_procs(dir);
}

bool sbx__cg_empty(const struct sbx__cg *cg)
{
	if (cg->version == SBX__CG_V2 && cg->dir[0]) {
		/* "populated" counts the directories below too. */
		char buf[256];
		if (read_small(cg->dir[0], "cgroup.events", buf, sizeof buf) > 0) {
			int64_t p = key_value(buf, "populated");
			if (p >= 0)
				return p == 0;
		}
	}
	for (int i = 0; i < SBX__CG_NDIR; i++) {
		if (!cg->dir[i])
			continue;
		bool found = has_procs(cg->dir[i]);
		if (!found)
			each_subdir(cg->dir[i], 0, any_procs, &found);
		if (found)
			return false;
	}
	return true;
}

/* ---------------------------------------------------------------- destroy */

/* Removes a directory below a run's (each_subdir callback). */
static void remove_sub(const char *dir, void *arg)
{
	(void)arg;
	rmdir(dir);
}

static long ms_since(const struct timespec *t0)
{
	return (long)(sbx__seconds_since(t0) * 1000);
}

void sbx__cg_destroy(struct sbx__cg *cg)
{
	if (cg->version != SBX__CG_NONE) {
		/* Usually the tree is gone already: the run ended, its processes
		 * were killed and our child reaped.  Otherwise kill, and wait a
		 * little for the dying to leave, killing again now and then; the
		 * whole stays within DRAIN_MS, killing included. */
		struct timespec t0;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		for (long last = -1000; !sbx__cg_empty(cg) && ms_since(&t0) < DRAIN_MS;) {
			if (ms_since(&t0) - last >= 50) {
				last = ms_since(&t0);
				sbx__cg_kill(cg);
			} else {
				sleep_ms(5);
			}
		}
		for (int i = SBX__CG_NDIR - 1; i >= 0; i--) {
			if (!cg->dir[i])
				continue;
			each_subdir(cg->dir[i], 0, remove_sub, NULL);
			/* A cgroup whose last member is still exiting refuses with
			 * EBUSY for a moment. */
			while (rmdir(cg->dir[i]) < 0 && errno == EBUSY && ms_since(&t0) < DRAIN_MS)
				sleep_ms(5);
		}
	}
	for (int i = 0; i < SBX__CG_NDIR; i++) {
		free(cg->dir[i]);
		free(cg->procs[i]);
	}
	memset(cg, 0, sizeof *cg);
}

/* ---------------------------------------------------------------- reclaim */

/* The pid in a run cgroup's name "sbx-PID-SEQ", or 0 for any other name. */
static pid_t run_name_pid(const char *name)
{
	if (strncmp(name, "sbx-", 4) != 0)
		return 0;
	const char *p = name + 4, *dash = strchr(p, '-');
	if (!dash || dash == p || dash[1] == '\0' || dash - p > 10)
		return 0;
	long long pid = 0;
	for (const char *c = p; c < dash; c++) {
		if (*c < '0' || *c > '9')
			return 0;
		pid = pid * 10 + (*c - '0');
	}
	for (const char *c = dash + 1; *c; c++)
		if (*c < '0' || *c > '9')
			return 0;
	return pid > 0 && pid <= INT_MAX ? (pid_t)pid : 0;
}

static void reclaim_in(enum sbx__cg_version version, const char *parent)
{
	DIR *d = opendir(parent);
	if (!d)
		return;
	/* Names first, removal after: rmdir during readdir may skip entries. */
	sbx__strv stale = {0};
	struct dirent *e;
	pid_t self = getpid();
	while ((e = readdir(d))) {
		pid_t pid = run_name_pid(e->d_name);
		/* Only a supervisor known to be dead: EPERM is a live one of
		 * another user. */
		if (pid <= 0 || pid == self || kill(pid, 0) == 0 || errno != ESRCH)
			continue;
		if (sbx__strv_push(&stale, e->d_name) < 0)
			break;
	}
	closedir(d);
	for (size_t i = 0; i < stale.n; i++) {
		struct sbx__cg cg = { .version = version };
		if (asprintf(&cg.dir[0], "%s/%s", parent, stale.v[i]) < 0)
			break;
		sbx__cg_destroy(&cg);
	}
	sbx__strv_free(&stale);
}

void sbx__cg_reclaim(const struct sbx__cg_caps *caps)
{
	for (int i = 0; i < SBX__CG_NDIR; i++) {
		if (!caps->parent[i])
			continue;
		bool seen = false;
		for (int j = 0; j < i; j++)
			seen |= caps->parent[j] && strcmp(caps->parent[j], caps->parent[i]) == 0;
		if (!seen)
			reclaim_in(caps->version, caps->parent[i]);
	}
}
