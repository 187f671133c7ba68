/*
 * watchdog.c -- the memory watchdog (watchdog.h): one timer on the loop for
 * every watched tree, each tree's resident memory summed from kept-open
 * /proc/PID/statm files.
 *
 * A tick does two things, in this order, so that a member found by the scan
 * counts in the same tick's sum:
 *
 *   1. The scan: finds the processes that joined a tree since the last tick
 *      (a process whose parent is a member) and opens their statm.  One scan
 *      serves every entry: the members of all trees go into one table, and
 *      each candidate's stat is read once and looked up there.
 *   2. The samples: one pread() of each member's statm.  A read that fails
 *      (ESRCH: the process was reaped) or returns nothing means the member is
 *      gone, and its fd is closed.  A zombie reads as all zeros until reaped.
 *
 * Sampling costs 2 to 3 us per member.  Reading a process's /proc/PID/stat
 * costs about 8 us (open, read, close; bench/watchdog measures both), so a
 * scan of every process on every tick would cost more than the samples it
 * serves.  Three facts keep most ticks from reading any stat file at all:
 *
 *   - The last field of /proc/loadavg is the last pid handed out in our pid
 *     namespace; a fork in a nested namespace takes a pid in ours as well.  If
 *     it has not moved since the last scan, no process was created anywhere,
 *     so no tree can have gained a member, and the tick skips the scan.
 *   - pids are handed out in increasing order until they wrap at pid_max,
 *     which shows as that last pid going down.  So without a wrap, a process
 *     created since a scan has a pid above the one read then, and a scan
 *     reads the stat of only those ("new" scan; see find_members() for why
 *     it reaches back one scan more).  Every older process was read by an
 *     earlier scan and was in no tree then, and a process outside every tree
 *     cannot enter one later: its parent only ever changes to a reaper, and
 *     it is re-parented to a member only when it was already below that
 *     member.
 *   - Members are known: even a full scan reads the stat of non-members only.
 *
 * A new scan covers few pids, usually a handful; up to PROBE_MAX of them are
 * looked up by number, since listing /proc makes the kernel build an entry
 * for every process (about 0.5 us each).  A pid looked up that way may be a
 * thread's, which /proc answers for but never lists; its stat shows it
 * (exit_signal -1), and it is passed over, or its process's memory would be
 * counted twice.
 *
 * A new entry's root may have children already, which earlier scans saw
 * and left; being younger than the root they have higher pids, so the next
 * scan reaches back to the root's pid.  A full scan is done after a wrap,
 * after a failure that may have hidden a process (no fd, no memory), and
 * every FULL_EVERY ticks in case /proc/loadavg does not mean what we think.
 * It is trusted only when it is the kernel's own file (not a container's
 * stand-in such as lxcfs) and /proc shows our own pid namespace, and it is
 * given up for good when a scheduled full scan finds a member the gated
 * scans should have found.  Without it, every scan is full, on the plain
 * schedule: every tick while a tree is young or has just changed, else every
 * UNGATED_EVERY ticks.
 *
 * What it cannot see: a process whose parent exits before any scan found it
 * is re-parented away from the tree, unless it stays in the root's session
 * (the run engine makes the root a session leader), which a scan also
 * matches.  A pid reused within one interval would need the whole pid space
 * to wrap in that time.  Resident pages shared between members (after fork)
 * count once per member, so the sum errs high.
 *
 * The timer is added only while there are entries, so an idle watchdog
 * never keeps its loop from returning, and /proc fds are held only then.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* getdents64, memrchr */
#endif
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/magic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <event2/event.h>

#include "internal.h"
#include "watchdog.h"

/* The interval when the caller gives none, and the shortest allowed. */
#define DEFAULT_INTERVAL 0.25
#define MIN_INTERVAL 0.001
/* A full scan at least every this many ticks (8 s at 4 Hz). */
#define FULL_EVERY 32
/* Without a usable last pid: a scan every tick for this many ticks after a
 * tree was added or changed, else every UNGATED_EVERY ticks. */
#define HOT_TICKS 8
#define UNGATED_EVERY 4
/* Members an entry has room for before its array grows. */
#define INITIAL_MEMBERS 4
/* A scan of at most this many new pids looks each up rather than list /proc. */
#define PROBE_MAX 256
/* getdents64 buffer: /proc's pid entries are 24 to 32 bytes each. */
#define DENTS_SIZE (32 * 1024)

struct member {
	pid_t pid;
	int fd;                     /* /proc/PID/statm */
};

struct sbx__wd_entry {
	struct sbx__wd_entry *prev, *next;
	struct member *m;           /* m[0..n) */
	uint32_t n, cap;
	pid_t root;
	bool root_alive;            /* root's statm still reads: its pid cannot be reused */
	bool fired;                 /* over() was called */
	int64_t peak;               /* bytes; -1 before the first sample */
	uint64_t limit;
	void (*over)(void *arg);
	void *arg;
};

/* A process the scan read: a candidate member. */
struct candidate {
	pid_t pid, ppid, sid;
};

/* The table from member pid to its entry, rebuilt by each scan. */
struct slot {
	pid_t pid;                  /* 0: empty */
	struct sbx__wd_entry *e;
};

struct sbx__watchdog {
	struct event *timer;
	struct timeval interval;
	struct sbx__wd_entry *head, *tail;
	/* The entry the tick samples next: sbx__watchdog_remove() moves it on,
	 * so over() may remove any entry. */
	struct sbx__wd_entry *next_up;
	size_t nentries, nmembers;
	uint64_t page_size;

	/* Held while there are entries; -1 otherwise. */
	int proc_fd;                /* /proc */
	int loadavg_fd;             /* /proc/loadavg; -1 when it cannot gate scans */

	uint64_t tick;
	uint64_t hot_until;         /* tick until which an ungated watchdog scans every tick */
	/* The last pid handed out, read before the last scan and before the
	 * one before it: a scan reads the stat of processes above the older. */
	long last_pid, last_pid_before;
	bool need_full;             /* the next scan must read every non-member */
	/* During a full scan that only checks on the gate: a member adopted at
	 * or below this pid is one the gate should have let a scan find. */
	long check_below;
	bool gate_missed;
	bool force_full;            /* SBX__WD_EVERY_TICK */
	bool no_gate;               /* SBX__WD_PLAIN or SBX__WD_EVERY_TICK */

	/* Scratch reused by every scan, so a steady tick allocates nothing. */
	char *dents;
	struct candidate *cand;
	size_t ncand, capcand;
	struct slot *table;
	size_t table_cap, table_n;  /* cap is a power of two, at most half full */

	struct sbx__wd_stats stats;
};

/* -------------------------------------------------------------- /proc text */

/* Writes "PID/NAME" into |buf| (at least 32 bytes) without snprintf: the scan
 * builds one such path per process. */
static void proc_path(char *buf, pid_t pid, const char *name)
{
	char digits[16];
	int n = 0;
	unsigned v = (unsigned)pid;
	do
		digits[n++] = (char)('0' + v % 10);
	while ((v /= 10) != 0);
	while (n > 0)
		*buf++ = digits[--n];
	*buf++ = '/';
	while ((*buf++ = *name++) != '\0')
		;
}

/* Parses a decimal number at *p, moving *p past it; -1 if there is none. */
static long parse_num(const char **p, const char *end)
{
	const char *s = *p;
	while (s < end && *s == ' ')
		s++;
	if (s == end || *s < '0' || *s > '9')
		return -1;
	long v = 0;
	while (s < end && *s >= '0' && *s <= '9' && v < LONG_MAX / 10)
		v = v * 10 + (*s++ - '0');
	*p = s;
	return v;
}

/* What read_stat() found. */
enum stat_kind {
	STAT_GONE,      /* no such process, or unreadable */
	STAT_PROCESS,   /* a process (a thread group's leader) */
	STAT_THREAD,    /* another thread: /proc/TID works, though /proc does not list it */
	STAT_UNKNOWN,   /* the line was too long to tell */
};

/* Skips |n| space-separated fields at *p; false if the line ends first. */
static bool skip_fields(const char **p, const char *end, int n)
{
	const char *s = *p;
	while (n > 0 && s < end)
		if (*s++ == ' ')
			n--;
	*p = s;
	return n == 0 && s < end;
}

/* Reads the parent and session of |pid| from its stat, and what it is. */
static enum stat_kind read_stat(struct sbx__watchdog *wd, pid_t pid, pid_t *ppid, pid_t *sid)
{
	char path[32], buf[1024];
	proc_path(path, pid, "stat");
	int fd = openat(wd->proc_fd, path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		/* A process that merely exited is not a loss; running out of fds
		 * may have hidden one, and only a full scan finds it again. */
		if (errno != ENOENT && errno != ESRCH)
			wd->need_full = true;
		return STAT_GONE;
	}
	ssize_t n = read(fd, buf, sizeof buf);
	close(fd);
	wd->stats.stat_reads++;
	if (n <= 0)
		return STAT_GONE;
	/* "pid (comm) S ppid pgrp session ...": the command may hold spaces and
	 * parentheses, the fields after it never do, and it ends within the
	 * first 100 bytes, so the last ')' read is the one that closes it. */
	const char *end = buf + n;
	const char *p = memrchr(buf, ')', (size_t)n);
	if (!p || end - p < 4)
		return STAT_GONE;
	p += 3; /* ") S" */
	long pp = parse_num(&p, end);
	long pg = parse_num(&p, end);
	long sess = parse_num(&p, end);
	if (pp < 0 || pg < 0 || sess < 0)
		return STAT_GONE;
	*ppid = (pid_t)pp;
	*sid = (pid_t)sess;
	/* Field 38, exit_signal, is -1 for every thread but the leader: the
	 * only mark a thread's stat bears.  We stand after field 6. */
	if (!skip_fields(&p, end, 32))
		return STAT_UNKNOWN;
	return *p == '-' ? STAT_THREAD : STAT_PROCESS;
}

/* The last pid handed out, from the last field of /proc/loadavg; -1 if it
 * cannot be read, which turns the gate off for good. */
static long read_last_pid(struct sbx__watchdog *wd)
{
	char buf[128];
	ssize_t n = pread(wd->loadavg_fd, buf, sizeof buf - 1, 0);
	if (n <= 0)
		return -1;
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' '))
		n--;
	buf[n] = '\0';
	const char *p = memrchr(buf, ' ', (size_t)n);
	if (!p)
		return -1;
	p++;
	long v = parse_num(&p, buf + n);
	return p == buf + n ? v : -1;
}

/* --------------------------------------------------------- /proc fds */

static void close_proc(struct sbx__watchdog *wd)
{
	if (wd->proc_fd >= 0)
		close(wd->proc_fd);
	if (wd->loadavg_fd >= 0)
		close(wd->loadavg_fd);
	wd->proc_fd = wd->loadavg_fd = -1;
}

/*
 * Opens /proc, and /proc/loadavg when its last pid can gate scans: only when
 * /proc lists the pids of our own namespace (the one loadavg counts in), and
 * loadavg is the kernel's own file, not a container's stand-in mounted over
 * it (lxcfs uses FUSE) that may count something else or nothing.
 */
static int open_proc(struct sbx__watchdog *wd)
{
	wd->proc_fd = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (wd->proc_fd < 0)
		return -errno;
	char self[32];
	ssize_t n = readlinkat(wd->proc_fd, "self", self, sizeof self - 1);
	if (n > 0) {
		self[n] = '\0';
		const char *p = self;
		if (parse_num(&p, self + n) == (long)getpid() && p == self + n && !wd->no_gate)
			wd->loadavg_fd = openat(wd->proc_fd, "loadavg", O_RDONLY | O_CLOEXEC);
	}
	struct statfs fs;
	long last = 0;
	if (wd->loadavg_fd >= 0 &&
	    (fstatfs(wd->loadavg_fd, &fs) < 0 || fs.f_type != PROC_SUPER_MAGIC ||
	     (last = read_last_pid(wd)) <= 0)) {
		close(wd->loadavg_fd);
		wd->loadavg_fd = -1;
	}
	/* Nothing is watched yet, so nothing older can matter. */
	wd->last_pid = wd->last_pid_before = last;
	return 0;
}

static int open_statm(struct sbx__watchdog *wd, pid_t pid)
{
	char path[32];
	proc_path(path, pid, "statm");
	return openat(wd->proc_fd, path, O_RDONLY | O_CLOEXEC);
}

/* ------------------------------------------------------- the member table */

static size_t slot_of(const struct sbx__watchdog *wd, pid_t pid)
{
	return ((uint32_t)pid * 2654435761u) & (wd->table_cap - 1);
}

static struct sbx__wd_entry *table_find(const struct sbx__watchdog *wd, pid_t pid)
{
	if (pid <= 0 || !wd->table)
		return NULL;
	for (size_t i = slot_of(wd, pid);; i = (i + 1) & (wd->table_cap - 1)) {
		if (wd->table[i].pid == pid)
			return wd->table[i].e;
		if (wd->table[i].pid == 0)
			return NULL;
	}
}

static void table_put(struct sbx__watchdog *wd, pid_t pid, struct sbx__wd_entry *e)
{
	size_t i = slot_of(wd, pid);
	while (wd->table[i].pid != 0 && wd->table[i].pid != pid)
		i = (i + 1) & (wd->table_cap - 1);
	if (wd->table[i].pid == 0)
		wd->table_n++;
	wd->table[i] = (struct slot){ pid, e };
}

/* Makes the table hold every member, with room for |extra| more at most half
 * full; it only grows, so a steady scan allocates nothing. */
static int table_rebuild(struct sbx__watchdog *wd, size_t extra)
{
	size_t want = 2 * (wd->nmembers + extra);
	if (want > wd->table_cap) {
		size_t cap = wd->table_cap ? wd->table_cap : 64;
		while (cap < want)
			cap *= 2;
		struct slot *t = malloc(cap * sizeof *t);
		if (!t)
			return -ENOMEM;
		free(wd->table);
		wd->table = t;
		wd->table_cap = cap;
	}
	memset(wd->table, 0, wd->table_cap * sizeof *wd->table);
	wd->table_n = 0;
	for (struct sbx__wd_entry *e = wd->head; e; e = e->next)
		for (uint32_t i = 0; i < e->n; i++)
			table_put(wd, e->m[i].pid, e);
	return 0;
}

/* ------------------------------------------------------------ members */

static int push_member(struct sbx__watchdog *wd, struct sbx__wd_entry *e, pid_t pid, int fd)
{
	if (e->n == e->cap) {
		uint32_t cap = e->cap ? 2 * e->cap : INITIAL_MEMBERS;
		struct member *m = realloc(e->m, cap * sizeof *m);
		if (!m)
			return -ENOMEM;
		e->m = m;
		e->cap = cap;
	}
	e->m[e->n++] = (struct member){ pid, fd };
	wd->nmembers++;
	return 0;
}

static void drop_member(struct sbx__watchdog *wd, struct sbx__wd_entry *e, uint32_t i)
{
	if (e->m[i].pid == e->root)
		e->root_alive = false;
	close(e->m[i].fd);
	e->m[i] = e->m[--e->n];
	wd->nmembers--;
	wd->stats.departed++;
	wd->hot_until = wd->tick + HOT_TICKS;
}

/* The entry a process with this parent and session belongs to: its parent's,
 * or the entry whose root leads its session (while the root is unreaped, no
 * other process can have that session id). */
static struct sbx__wd_entry *owner(const struct sbx__watchdog *wd, pid_t ppid, pid_t sid)
{
	struct sbx__wd_entry *e = table_find(wd, ppid);
	if (e)
		return e;
	e = table_find(wd, sid);
	return e && e->root == sid && e->root_alive ? e : NULL;
}

/*
 * Makes |c| a member of its owner's tree.  Its stat was read before its
 * statm was opened, and the pid may have changed hands in between; so the
 * parent is read again now that the fd holds the process, and decides.
 * Returns whether |c| is settled (taken, or gone).
 */
static bool adopt(struct sbx__watchdog *wd, const struct candidate *c)
{
	if (!owner(wd, c->ppid, c->sid))
		return false;
	int fd = open_statm(wd, c->pid);
	if (fd < 0) {
		if (errno != ENOENT && errno != ESRCH)
			wd->need_full = true;
		return true;
	}
	pid_t ppid, sid;
	struct sbx__wd_entry *e = NULL;
	if (read_stat(wd, c->pid, &ppid, &sid) == STAT_PROCESS)
		e = owner(wd, ppid, sid);
	if (!e) {
		close(fd);
		return true;
	}
	if (wd->table_n * 2 >= wd->table_cap && table_rebuild(wd, wd->table_cap) < 0) {
		close(fd);
		wd->need_full = true;
		return true;
	}
	if (push_member(wd, e, c->pid, fd) < 0) {
		close(fd);
		wd->need_full = true;
		return true;
	}
	table_put(wd, c->pid, e);
	if (c->pid <= wd->check_below)
		wd->gate_missed = true;
	wd->stats.adopted++;
	wd->hot_until = wd->tick + HOT_TICKS;
	return true;
}

/* ---------------------------------------------------------------- scan */

static int push_candidate(struct sbx__watchdog *wd, pid_t pid, pid_t ppid, pid_t sid)
{
	if (wd->ncand == wd->capcand) {
		size_t cap = wd->capcand ? 2 * wd->capcand : 256;
		struct candidate *c = realloc(wd->cand, cap * sizeof *c);
		if (!c)
			return -ENOMEM;
		wd->cand = c;
		wd->capcand = cap;
	}
	wd->cand[wd->ncand++] = (struct candidate){ pid, ppid, sid };
	return 0;
}

/* Reads the stat of |pid|, not yet a member, and keeps it as a candidate. */
static void consider(struct sbx__watchdog *wd, pid_t pid, bool listed)
{
	pid_t ppid, sid;
	switch (read_stat(wd, pid, &ppid, &sid)) {
	case STAT_GONE:
	case STAT_THREAD:
		return;
	case STAT_UNKNOWN:
		/* /proc lists only leaders, so a listed one is a process. */
		if (!listed) {
			wd->need_full = true;
			return;
		}
		break;
	case STAT_PROCESS:
		break;
	}
	/* Running out of memory here may hide a member. */
	if (push_candidate(wd, pid, ppid, sid) < 0)
		wd->need_full = true;
}

/* Considers every process /proc lists above |from|; -1 if the listing failed. */
static int list_proc(struct sbx__watchdog *wd, long from)
{
	if (!wd->dents && !(wd->dents = malloc(DENTS_SIZE)))
		return -1;
	if (lseek(wd->proc_fd, 0, SEEK_SET) < 0)
		return -1;
	for (;;) {
		ssize_t n = getdents64(wd->proc_fd, wd->dents, DENTS_SIZE);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -1;
		if (n == 0)
			return 0;
		for (ssize_t off = 0; off < n;) {
			const struct dirent64 *d = (const void *)(wd->dents + off);
			off += d->d_reclen;
			const char *p = d->d_name;
			long pid = parse_num(&p, p + strlen(p));
			if (pid <= 0 || *p != '\0' || pid > INT_MAX)
				continue;
			if (pid > from && !table_find(wd, (pid_t)pid))
				consider(wd, (pid_t)pid, true);
		}
	}
}

/*
 * One scan: reads the stat of every process above |from| that is not a
 * member yet, then adopts the candidates whose parent is a member, again
 * and again while that finds more (a child considered before its parent,
 * as after a wrap).  When only the pids (from, to] can be new and they are
 * few, each is looked up by number, which costs less than listing /proc
 * (listing makes the kernel build an entry for every process); a pid taken
 * by a thread is passed over.  Returns 0, or -1 when the listing failed.
 */
static int scan(struct sbx__watchdog *wd, long from, long to)
{
	if (table_rebuild(wd, 16) < 0)
		return -1;
	wd->ncand = 0;
	if (to >= from && to - from <= PROBE_MAX) {
		wd->stats.probes += (uint64_t)(to - from);
		for (long pid = from + 1; pid <= to; pid++)
			if (!table_find(wd, (pid_t)pid))
				consider(wd, (pid_t)pid, false);
	} else if (list_proc(wd, from) < 0) {
		return -1;
	}
	bool more = true;
	while (more) {
		more = false;
		for (size_t i = 0; i < wd->ncand;) {
			if (adopt(wd, &wd->cand[i])) {
				wd->cand[i] = wd->cand[--wd->ncand];
				more = true;
			} else {
				i++;
			}
		}
	}
	return 0;
}

/*
 * Decides whether this tick scans, and how much, then scans.
 *
 * A fork takes its pid a moment before /proc lists the child, so a scan can
 * miss a child whose pid is below the last pid it read.  Hence a scan reads
 * the processes above the last pid read two scans ago, and the tick after a
 * scan that saw the last pid move scans once more even if it has not moved
 * since: a quiet tree stops costing scans one tick later.
 */
static void find_members(struct sbx__watchdog *wd)
{
	bool periodic = wd->tick % FULL_EVERY == 0;
	bool full = wd->force_full || wd->need_full || periodic;
	long last = -1;
	if (wd->loadavg_fd >= 0 && (last = read_last_pid(wd)) <= 0) {
		close(wd->loadavg_fd);
		wd->loadavg_fd = -1;
	}
	if (wd->loadavg_fd >= 0) {
		if (last < wd->last_pid || wd->last_pid < wd->last_pid_before) {
			full = true; /* the pid counter wrapped */
			periodic = false;
		} else if (last == wd->last_pid && wd->last_pid == wd->last_pid_before && !full) {
			wd->stats.scans_skipped++;
			return;
		}
	} else {
		if (!full && wd->tick >= wd->hot_until && wd->tick % UNGATED_EVERY != 0) {
			wd->stats.scans_skipped++;
			return;
		}
		full = true;
	}
	/* A full scan that is due only to the schedule checks on the gate:
	 * every process at or below the older last pid was read by two scans
	 * already, so adopting one now means /proc/loadavg misled us. */
	wd->check_below = periodic && !wd->need_full && !wd->force_full && wd->loadavg_fd >= 0 ?
	                  wd->last_pid_before : 0;
	wd->gate_missed = false;
	wd->need_full = false;
	int rc = full ? scan(wd, 0, -1) : scan(wd, wd->last_pid_before, last);
	wd->check_below = 0;
	if (rc < 0) {
		wd->need_full = true;
		return;
	}
	if (full)
		wd->stats.scans_full++;
	else
		wd->stats.scans_new++;
	if (wd->gate_missed && wd->loadavg_fd >= 0) {
		close(wd->loadavg_fd);
		wd->loadavg_fd = -1;
	}
	wd->last_pid_before = wd->last_pid;
	wd->last_pid = last;
}

/* ------------------------------------------------------------- samples */

/* Resident pages: the second field of statm. */
static uint64_t statm_resident(const char *buf, ssize_t n)
{
	const char *p = buf, *end = buf + n;
	if (parse_num(&p, end) < 0)
		return 0;
	long v = parse_num(&p, end);
	return v > 0 ? (uint64_t)v : 0;
}

/* Sums the resident memory of |e|'s members, dropping those that are gone. */
static uint64_t sample(struct sbx__watchdog *wd, struct sbx__wd_entry *e)
{
	uint64_t pages = 0;
	char buf[64];
	for (uint32_t i = 0; i < e->n;) {
		/* Two fields of at most 20 digits fit in 64 bytes; the rest of the
		 * line is not needed. */
		ssize_t n = pread(e->m[i].fd, buf, sizeof buf, 0);
		wd->stats.samples++;
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			drop_member(wd, e, i);
			continue;
		}
		pages += statm_resident(buf, n);
		i++;
	}
	return pages * wd->page_size;
}

static void on_tick(evutil_socket_t fd, short what, void *arg)
{
	struct sbx__watchdog *wd = arg;
	wd->tick++;
	wd->stats.ticks++;
	find_members(wd);
	/* over() may remove entries, this one or the next included, and add
	 * new ones at the tail; next_up is where to go on either way.  Nothing
	 * of |e| is touched after over() returns. */
	for (struct sbx__wd_entry *e = wd->head; e; e = wd->next_up) {
		wd->next_up = e->next;
		uint64_t bytes = sample(wd, e);
		if (bytes > INT64_MAX)
			bytes = INT64_MAX;
		if ((int64_t)bytes > e->peak)
			e->peak = (int64_t)bytes;
		if (bytes > e->limit && !e->fired) {
			e->fired = true;
			e->over(e->arg);
		}
	}
	wd->next_up = NULL;
}

/* ----------------------------------------------------------------- API */

struct sbx__watchdog *sbx__watchdog_new(struct event_base *base, double interval)
{
	struct sbx__watchdog *wd = calloc(1, sizeof *wd);
	if (!wd)
		return NULL;
	if (!(interval > 0))
		interval = DEFAULT_INTERVAL;
	if (interval < MIN_INTERVAL)
		interval = MIN_INTERVAL;
	if (interval > 1e6)
		interval = 1e6;
	wd->interval.tv_sec = (time_t)interval;
	wd->interval.tv_usec = (suseconds_t)((interval - (double)wd->interval.tv_sec) * 1e6);
	wd->proc_fd = wd->loadavg_fd = -1;
	long page = sysconf(_SC_PAGESIZE);
	wd->page_size = page > 0 ? (uint64_t)page : 4096;
	wd->timer = event_new(base, -1, EV_PERSIST, on_tick, wd);
	if (!wd->timer) {
		free(wd);
		errno = ENOMEM;
		return NULL;
	}
	return wd;
}

/*
 * Every entry must have been removed; any left are removed here, without
 * calling back.  Not to be called from inside an over() callback: the tick
 * that called it still walks the watchdog when the callback returns.
 */
void sbx__watchdog_free(struct sbx__watchdog *wd)
{
	if (!wd)
		return;
	while (wd->head)
		sbx__watchdog_remove(wd, wd->head);
	event_free(wd->timer);
	close_proc(wd);
	free(wd->dents);
	free(wd->cand);
	free(wd->table);
	free(wd);
}

/*
 * NULL with errno set when it fails: EINVAL (no root or callback), ESRCH or
 * ENOENT (|root| is gone), EMFILE, ENOMEM.  The root's statm is opened here,
 * so that its pid, which cannot be reused while our child is unreaped, is
 * bound to the fd before anything else can happen to it.
 */
struct sbx__wd_entry *sbx__watchdog_add(struct sbx__watchdog *wd, pid_t root, uint64_t limit,
                                        void (*over)(void *arg), void *arg)
{
	if (!wd || root <= 0 || !over) {
		errno = EINVAL;
		return NULL;
	}
	int rc;
	if (wd->nentries == 0 && (rc = open_proc(wd)) < 0) {
		errno = -rc;
		return NULL;
	}
	struct sbx__wd_entry *e = calloc(1, sizeof *e);
	int fd = -1, err = ENOMEM;
	if (!e)
		goto fail;
	if ((fd = open_statm(wd, root)) < 0) {
		err = errno;
		goto fail;
	}
	if (push_member(wd, e, root, fd) < 0)
		goto fail;
	if (wd->nentries == 0 && event_add(wd->timer, &wd->interval) < 0) {
		wd->nmembers--;
		goto fail;
	}
	e->root = root;
	e->root_alive = true;
	e->peak = -1;
	e->limit = limit;
	e->over = over;
	e->arg = arg;
	e->prev = wd->tail;
	if (wd->tail)
		wd->tail->next = e;
	else
		wd->head = e;
	wd->tail = e;
	wd->nentries++;
	/* Its root may have forked before it was added: children that earlier
	 * scans saw and left, because the root was no member.  Being younger,
	 * they have higher pids than the root unless the counter wrapped in
	 * between (the run engine adds the root as soon as it is spawned), so
	 * the next scan reaches back to the root's pid; or it reads everything
	 * when the last pid shows a wrap or cannot be read. */
	long last = wd->loadavg_fd >= 0 ? read_last_pid(wd) : -1;
	if (last >= root && last >= wd->last_pid) {
		if (root < wd->last_pid_before)
			wd->last_pid_before = root;
	} else {
		wd->need_full = true;
	}
	wd->hot_until = wd->tick + HOT_TICKS;
	return e;

fail:
	if (fd >= 0)
		close(fd);
	if (e)
		free(e->m);
	free(e);
	if (wd->nentries == 0)
		close_proc(wd);
	errno = err;
	return NULL;
}

void sbx__watchdog_remove(struct sbx__watchdog *wd, struct sbx__wd_entry *e)
{
	if (!wd || !e)
		return;
	if (wd->next_up == e)
		wd->next_up = e->next;
	if (e->prev)
		e->prev->next = e->next;
	else
		wd->head = e->next;
	if (e->next)
		e->next->prev = e->prev;
	else
		wd->tail = e->prev;
	for (uint32_t i = 0; i < e->n; i++)
		close(e->m[i].fd);
	wd->nmembers -= e->n;
	free(e->m);
	free(e);
	/* The last entry stops the timer, so an idle loop can return. */
	if (--wd->nentries == 0) {
		event_del(wd->timer);
		close_proc(wd);
	}
}

int64_t sbx__watchdog_peak(const struct sbx__wd_entry *e)
{
	return e ? e->peak : -1;
}

void sbx__watchdog_stats(const struct sbx__watchdog *wd, struct sbx__wd_stats *out)
{
	*out = wd->stats;
}

void sbx__watchdog_set_schedule(struct sbx__watchdog *wd, enum sbx__wd_schedule s)
{
	wd->force_full = s == SBX__WD_EVERY_TICK;
	wd->no_gate = s != SBX__WD_GATED;
	if (wd->no_gate && wd->loadavg_fd >= 0) {
		close(wd->loadavg_fd);
		wd->loadavg_fd = -1;
	}
}
