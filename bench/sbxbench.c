/*
 * bench/sbxbench.c -- sbx against what users would pick instead (issue 6).
 *
 *   bench/sbxbench [--full | --mode quick|full] [--repeats N] [--only SECTIONS] [--program PATH]
 *                  [--tiny PATH] [--scripts DIR] [--python PATH] [--node PATH]
 *                  [--json FILE] [--markdown FILE] [--scale-runs N] [--methods LIST]
 *
 * `make bench` runs the quick mode (under two minutes); `make bench
 * BENCH_MODE=full` runs --full (ten to twelve minutes).  Sections (--only,
 * comma-separated; --methods narrows the spawn section to some of its rows):
 *
 *   spawn     runs per second and latency p50/p99 at concurrency 1, 16 and
 *             256, for /bin/true (or --program) and bench/tiny (a static
 *             program without libc that exits at once): the floor (a minimal
 *             posix_spawn + pidfd + epoll loop, no library), sbx passthrough,
 *             sbx with each isolating backend, bwrap spawned by the same
 *             minimal loop (the exact command line sbx_sandbox_wrap() gives),
 *             and Python asyncio and Node.js child_process running that same
 *             bwrap command (bench/competitor.py, bench/competitor.js).
 *   scale     10,000 sleeping runs on one loop (quick mode: 2,000), as many
 *             as RLIMIT_NOFILE allows: start rate against the bare loop's,
 *             parent memory and fds per run, and the loop's lateness seen by
 *             a 10 ms timer probe; full mode adds 1,000 bwrap runs.
 *   output    draining one run that writes 1 GiB, against a bare read() loop
 *             on a pipe from the same writer; and discarding past the cap.
 *   watchdog  the CPU the memory watchdog costs for 1000 runs at 4 Hz.
 *   memory    parent and kernel memory per idle run, per backend.
 *
 * Every figure is printed as a ratio to a baseline measured in the same
 * invocation, as the median of the per-repeat ratios with their range; the
 * raw numbers go to the JSON file.  Measurements of one repeat are taken in
 * a rotating order, so that a noisy neighbour hits every method alike.
 *
 * All children are this program's own: they are killed by pid and reaped by
 * pid.  The memory section puts this process in a memory cgroup of its own
 * (cgroup v1, beneath the one it is in) to read the kernel memory its
 * children use, and moves it back and removes the cgroup when done.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <malloc.h>
#include <math.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>
#include <sbx.h>

#ifndef SBX_BENCH_SRCDIR
#define SBX_BENCH_SRCDIR "bench"
#endif
#ifndef SBX_BENCH_BUILDDIR
#define SBX_BENCH_BUILDDIR "bench"
#endif

extern char **environ;

#define MAX_REPEATS 32
#define MAX_PROGRAMS 2
#define NCONC 3
static const unsigned concurrency[NCONC] = { 1, 16, 256 };

/* The environment of every spawned program, wrapper or not (as sbx gives bwrap). */
static char *const child_env[] = { "PATH=/usr/sbin:/usr/bin:/sbin:/bin", NULL };

/* Goals of issue 6, reported against, never asserted. */
#define GOAL_PASSTHROUGH 0.90
#define GOAL_BWRAP 0.95
#define GOAL_DRAIN 0.75
#define GOAL_WATCHDOG_PERCENT 2.0
#define GOAL_BYTES_PER_RUN 4096.0

/* ------------------------------------------------------------------ config */

enum section { S_SPAWN = 1, S_SCALE = 2, S_OUTPUT = 4, S_WATCHDOG = 8, S_MEMORY = 16 };

static struct config {
	bool full;
	int repeats, repeats_fast, repeats_bwrap;
	unsigned sections;
	const char *program, *tiny, *scripts, *python, *node, *json, *markdown;
	unsigned n_fast[NCONC], n_bwrap[NCONC];
	unsigned scale_runs, scale_bwrap_runs;
	double idle_seconds, steady_seconds;
	unsigned wd_runs;
	double wd_seconds;
	unsigned mem_runs;
	uint64_t output_bytes;
	unsigned methods; /* bit per enum method measured by the spawn section */
} cfg;

static struct event_base *base;

/* ----------------------------------------------------------------- helpers */

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double cpu_seconds(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
	       (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "sbxbench: ");
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\n");
	va_end(ap);
	exit(1);
}

/* Copies what fits of |src| (messages are cut, not refused). */
static void copy_text(char *dst, size_t size, const char *src)
{
	size_t n = strlen(src);
	if (n >= size)
		n = size - 1;
	memcpy(dst, src, n);
	dst[n] = '\0';
}

static void *xcalloc(size_t n, size_t size)
{
	void *p = calloc(n ? n : 1, size);
	if (!p)
		die("out of memory");
	return p;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* The nearest-rank percentile |p| (0..1) of |v|, which it sorts. */
static double percentile(double *v, size_t n, double p)
{
	if (n == 0)
		return NAN;
	qsort(v, n, sizeof *v, cmp_double);
	size_t rank = (size_t)ceil(p * (double)n);
	return v[rank ? rank - 1 : 0];
}

/* Median, min and max of |n| values (copied: |v| keeps its order). */
struct stat3 {
	double med, lo, hi;
};

static struct stat3 stat3_of(const double *v, int n)
{
	double tmp[MAX_REPEATS * 4];
	int k = 0;
	for (int i = 0; i < n && k < (int)(sizeof tmp / sizeof *tmp); i++)
		if (!isnan(v[i]))
			tmp[k++] = v[i];
	if (k == 0)
		return (struct stat3){ NAN, NAN, NAN };
	qsort(tmp, (size_t)k, sizeof *tmp, cmp_double);
	double med = k % 2 ? tmp[k / 2] : (tmp[k / 2 - 1] + tmp[k / 2]) / 2;
	return (struct stat3){ med, tmp[0], tmp[k - 1] };
}

static long rss_bytes(void)
{
	long size = 0, resident = 0;
	FILE *f = fopen("/proc/self/statm", "r");
	if (f) {
		if (fscanf(f, "%ld %ld", &size, &resident) != 2)
			resident = 0;
		fclose(f);
	}
	return resident * sysconf(_SC_PAGESIZE);
}

/* Bytes malloc has handed out and not had back (heap and mmapped chunks). */
static long heap_bytes(void)
{
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))
	struct mallinfo2 mi = mallinfo2();
	return (long)(mi.uordblks + mi.hblkhd);
#else
	return 0;
#endif
}

static long count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	if (!d)
		return -1;
	long n = 0;
	struct dirent *e;
	while ((e = readdir(d)))
		if (isdigit((unsigned char)e->d_name[0]))
			n++;
	closedir(d);
	return n - 1; /* the directory's own */
}

/* Slab + KernelStack + PageTables from /proc/meminfo, in bytes. */
static long long meminfo_kernel(void)
{
	FILE *f = fopen("/proc/meminfo", "r");
	if (!f)
		return -1;
	char line[256];
	long long sum = 0, kb;
	char name[64];
	while (fgets(line, sizeof line, f))
		if (sscanf(line, "%63[^:]: %lld", name, &kb) == 2 &&
		    (strcmp(name, "Slab") == 0 || strcmp(name, "KernelStack") == 0 ||
		     strcmp(name, "PageTables") == 0))
			sum += kb * 1024;
	fclose(f);
	return sum;
}

static void read_line(const char *path, const char *prefix, char *out, size_t size)
{
	FILE *f = fopen(path, "r");
	char line[512];
	snprintf(out, size, "unknown");
	if (!f)
		return;
	size_t plen = strlen(prefix);
	while (fgets(line, sizeof line, f)) {
		if (strncmp(line, prefix, plen) == 0) {
			char *p = strchr(line, ':');
			p = p ? p + 1 : line + plen;
			while (*p == ' ' || *p == '\t')
				p++;
			p[strcspn(p, "\n")] = '\0';
			snprintf(out, size, "%s", p);
			break;
		}
	}
	fclose(f);
}

static double loadavg1(void)
{
	double l = NAN;
	FILE *f = fopen("/proc/loadavg", "r");
	if (f) {
		if (fscanf(f, "%lf", &l) != 1)
			l = NAN;
		fclose(f);
	}
	return l;
}

static int pidfd_open_(pid_t pid)
{
	return (int)syscall(SYS_pidfd_open, pid, 0);
}

static void reap(pid_t pid, int *status)
{
	int st = 0;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	if (status)
		*status = st;
}

/* Runs the loop until *counter reaches target or |timeout| seconds pass. */
static void on_nothing(evutil_socket_t fd, short what, void *arg)
{
	(void)fd, (void)what, (void)arg;
}

static bool loop_until(const unsigned *counter, unsigned target, double timeout)
{
	struct event *tick = event_new(base, -1, EV_PERSIST, on_nothing, NULL);
	struct timeval tv = { 0, 50000 };
	event_add(tick, &tv);
	double end = now() + timeout;
	while (*counter < target && now() < end)
		event_base_loop(base, EVLOOP_ONCE);
	event_free(tick);
	return *counter >= target;
}

static void loop_for(double seconds)
{
	struct timeval tv = { (time_t)seconds, (suseconds_t)((seconds - floor(seconds)) * 1e6) };
	struct event *tick = event_new(base, -1, EV_PERSIST, on_nothing, NULL);
	struct timeval t2 = { 1, 0 };
	event_add(tick, &t2); /* keeps the loop alive when nothing else is pending */
	event_base_loopexit(base, &tv);
	event_base_dispatch(base);
	event_free(tick);
}

/* -------------------------------------------------------------- JSON out */

/* A small writer: |jsep| says whether a comma is due at this depth. */
static FILE *J;
static bool jsep[32];
static int jdepth;

static void jcomma(void)
{
	if (jsep[jdepth])
		fputs(", ", J);
	jsep[jdepth] = true;
}

static void jstr(const char *s)
{
	fputc('"', J);
	for (; s && *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\')
			fprintf(J, "\\%c", c);
		else if (c < 0x20)
			fprintf(J, "\\u%04x", c);
		else
			fputc(c, J);
	}
	fputc('"', J);
}

static void jkey(const char *k)
{
	jcomma();
	if (k) {
		jstr(k);
		fputs(": ", J);
	}
}

static void jopen(const char *k, char c)
{
	jkey(k);
	fputc(c, J);
	jsep[++jdepth] = false;
}

static void jclose(char c)
{
	fputc(c, J);
	jdepth--;
	if (jdepth <= 1)
		fputc('\n', J);
}

static void jnum(const char *k, double v)
{
	jkey(k);
	if (isnan(v) || isinf(v))
		fputs("null", J);
	else
		fprintf(J, "%.9g", v);
}

static void jtext(const char *k, const char *v)
{
	jkey(k);
	if (v)
		jstr(v);
	else
		fputs("null", J);
}

static void jbool(const char *k, bool v)
{
	jkey(k);
	fputs(v ? "true" : "false", J);
}

/* ---------------------------------------------------------- the bare loop */

/*
 * The floor: what a careful C programmer writes without a library.  Each run
 * is posix_spawn() (glibc's is a vfork-style clone) into a new session, stdin
 * from /dev/null, stdout and stderr on pipes; a pidfd for its exit; one epoll
 * loop that reads the pipes to end-of-file and reaps by pid.
 */
struct sample {
	bool ok;         /* measured */
	unsigned runs;   /* completed with status 0 */
	unsigned failed;
	double seconds;  /* first start to last completion */
	double rps, p50, p99;
	char error[160];
};

static double *lat;        /* latencies of the current measurement */
static size_t nlat, lat_cap;
static int devnull = -1;

static void lat_reset(size_t need)
{
	if (need > lat_cap) {
		free(lat);
		lat = xcalloc(need, sizeof *lat);
		lat_cap = need;
	}
	nlat = 0;
}

static void sample_finish(struct sample *s, double seconds)
{
	s->ok = true;
	s->seconds = seconds;
	s->runs = (unsigned)nlat;
	s->rps = seconds > 0 ? (double)nlat / seconds : NAN;
	s->p50 = percentile(lat, nlat, 0.50);
	s->p99 = percentile(lat, nlat, 0.99);
}

struct bslot {
	pid_t pid;
	int pidfd, fd[2];
	int pending; /* of pidfd and the two pipes */
	int status;
	double t0;
};

struct bare {
	int ep;
	char *const *argv;
	posix_spawnattr_t attr;
	struct bslot *slot;
	double t0;
	unsigned conc, count, started, done, failed;
	char error[160];
};

static int bare_start(struct bare *b, unsigned i)
{
	struct bslot *s = &b->slot[i];
	/* The first |conc| runs were all asked for at the start. */
	s->t0 = b->started < b->conc ? b->t0 : now();
	int out[2], err[2];
	if (pipe2(out, O_CLOEXEC) < 0)
		return -errno;
	if (pipe2(err, O_CLOEXEC) < 0) {
		int e = errno;
		close(out[0]);
		close(out[1]);
		return -e;
	}
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, devnull, 0);
	posix_spawn_file_actions_adddup2(&fa, out[1], 1);
	posix_spawn_file_actions_adddup2(&fa, err[1], 2);
	int rc = posix_spawn(&s->pid, b->argv[0], &fa, &b->attr, b->argv, child_env);
	posix_spawn_file_actions_destroy(&fa);
	close(out[1]);
	close(err[1]);
	if (rc != 0) {
		close(out[0]);
		close(err[0]);
		return -rc;
	}
	s->fd[0] = out[0];
	s->fd[1] = err[0];
	fcntl(out[0], F_SETFL, O_NONBLOCK);
	fcntl(err[0], F_SETFL, O_NONBLOCK);
	s->pidfd = pidfd_open_(s->pid);
	if (s->pidfd < 0)
		die("pidfd_open: %s", strerror(errno));
	int fds[3] = { s->fd[0], s->fd[1], s->pidfd };
	for (int k = 0; k < 3; k++) {
		struct epoll_event ev = { .events = EPOLLIN, .data.u64 = ((uint64_t)i << 2) | (uint64_t)k };
		if (epoll_ctl(b->ep, EPOLL_CTL_ADD, fds[k], &ev) < 0)
			die("epoll_ctl: %s", strerror(errno));
	}
	s->pending = 3;
	b->started++;
	return 0;
}

/* Starts runs in free slot |i| until one starts or none are left. */
static void bare_next(struct bare *b, unsigned i)
{
	while (b->started < b->count) {
		int rc = bare_start(b, i);
		if (rc == 0)
			return;
		snprintf(b->error, sizeof b->error, "spawn: %s", strerror(-rc));
		b->started++;
		b->done++;
		b->failed++;
	}
}

static void bare_event(struct bare *b, uint64_t data, char *buf, size_t bufsize)
{
	unsigned i = (unsigned)(data >> 2);
	int kind = (int)(data & 3);
	struct bslot *s = &b->slot[i];
	/* Each fd leaves the epoll set before it is closed: a child being
	 * spawned holds a copy of every fd until its exec closes them, and
	 * until then a closed fd would stay registered and report on. */
	if (kind == 2) {
		reap(s->pid, &s->status);
		epoll_ctl(b->ep, EPOLL_CTL_DEL, s->pidfd, NULL);
		close(s->pidfd);
		s->pending--;
	} else {
		for (;;) {
			ssize_t n = read(s->fd[kind], buf, bufsize);
			if (n > 0)
				continue;
			if (n < 0 && errno == EINTR)
				continue;
			if (n < 0 && errno == EAGAIN)
				return;
			epoll_ctl(b->ep, EPOLL_CTL_DEL, s->fd[kind], NULL);
			close(s->fd[kind]);
			s->pending--;
			break;
		}
	}
	if (s->pending == 0) {
		b->done++;
		if (WIFEXITED(s->status) && WEXITSTATUS(s->status) == 0) {
			lat[nlat++] = now() - s->t0;
		} else {
			b->failed++;
			snprintf(b->error, sizeof b->error, "a run ended with wait status 0x%x", s->status);
		}
		bare_next(b, i);
	}
}

static void bare_loop(char *const *argv, unsigned conc, unsigned count, struct sample *s)
{
	struct bare b = { .argv = argv, .conc = conc, .count = count };
	b.ep = epoll_create1(EPOLL_CLOEXEC);
	if (b.ep < 0)
		die("epoll_create1: %s", strerror(errno));
	posix_spawnattr_init(&b.attr);
	posix_spawnattr_setflags(&b.attr, POSIX_SPAWN_SETSID);
	b.slot = xcalloc(conc, sizeof *b.slot);
	lat_reset(count);
	static char buf[65536];
	double t0 = b.t0 = now();
	for (unsigned i = 0; i < conc; i++)
		bare_next(&b, i);
	struct epoll_event ev[64];
	while (b.done < count) {
		int n = epoll_wait(b.ep, ev, 64, 60000);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			die("the bare loop is stuck: %s", n < 0 ? strerror(errno) : "no event for 60 s");
		for (int k = 0; k < n; k++)
			bare_event(&b, ev[k].data.u64, buf, sizeof buf);
	}
	sample_finish(s, now() - t0);
	s->failed = b.failed;
	copy_text(s->error, sizeof s->error, b.error);
	posix_spawnattr_destroy(&b.attr);
	close(b.ep);
	free(b.slot);
}

/* ------------------------------------------------------------ sbx driver */

struct drive;
struct dctx {
	struct drive *d;
	double t0;
};

struct drive {
	sbx_sandbox *sb;
	const char *const *argv;
	double t0;
	unsigned conc, count, started, done, failed;
	struct dctx *ctx;
	char error[160];
};

static void drive_next(struct drive *d);

static void drive_cb(sbx_result *r, void *arg)
{
	struct dctx *c = arg;
	struct drive *d = c->d;
	if (r->exited && r->exit_code == 0 && !r->error) {
		lat[nlat++] = now() - c->t0;
	} else {
		d->failed++;
		copy_text(d->error, sizeof d->error, r->error ? r->error :
		         r->out[SBX_STDERR].len ? r->out[SBX_STDERR].data : "a run failed");
	}
	sbx_result_free(r);
	d->done++;
	drive_next(d);
}

static void drive_next(struct drive *d)
{
	while (d->started < d->count) {
		/* The first |conc| runs were all asked for at the start. */
		struct dctx *c = &d->ctx[d->started];
		c->d = d;
		c->t0 = d->started++ < d->conc ? d->t0 : now();
		sbx_run_options o;
		sbx_run_options_init(&o);
		o.argv = d->argv;
		sbx_error err;
		if (sbx_run_start(d->sb, &o, drive_cb, c, NULL, &err) == 0)
			return;
		copy_text(d->error, sizeof d->error, err.message);
		d->failed++;
		d->done++;
	}
}

static void sbx_loop(sbx_sandbox *sb, const char *const *argv, unsigned conc, unsigned count,
                     struct sample *s)
{
	struct drive d = { .sb = sb, .argv = argv, .conc = conc, .count = count };
	d.ctx = xcalloc(count, sizeof *d.ctx);
	lat_reset(count);
	double t0 = d.t0 = now();
	for (unsigned i = 0; i < conc && d.started < count; i++)
		drive_next(&d);
	if (!loop_until(&d.done, count, 300))
		die("sbx runs did not finish in 300 s");
	sample_finish(s, now() - t0);
	s->failed = d.failed;
	copy_text(s->error, sizeof s->error, d.error);
	free(d.ctx);
}

/* ------------------------------------------------------ Python and Node */

/* Runs |argv| with stdout on a pipe; returns its output (caller frees) and status. */
static char *capture(char *const *argv, int *status)
{
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0)
		return NULL;
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, devnull, 0);
	posix_spawn_file_actions_adddup2(&fa, p[1], 1);
	pid_t pid;
	int rc = posix_spawn(&pid, argv[0], &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	close(p[1]);
	if (rc != 0) {
		close(p[0]);
		*status = -1;
		return NULL;
	}
	size_t len = 0, cap = 65536;
	char *out = xcalloc(cap, 1);
	for (;;) {
		if (len + 1 >= cap) {
			char *o2 = realloc(out, cap *= 2);
			if (!o2)
				die("out of memory");
			out = o2;
		}
		ssize_t n = read(p[0], out + len, cap - 1 - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		len += (size_t)n;
	}
	out[len] = '\0';
	close(p[0]);
	reap(pid, status);
	return out;
}

static void competitor(const char *interp, const char *script, char *const *wrapped, unsigned conc,
                       unsigned count, struct sample *s)
{
	size_t n = 0;
	while (wrapped[n])
		n++;
	char **argv = xcalloc(n + 6, sizeof *argv);
	char cbuf[16], nbuf[16];
	snprintf(cbuf, sizeof cbuf, "%u", conc);
	snprintf(nbuf, sizeof nbuf, "%u", count);
	argv[0] = (char *)interp;
	argv[1] = (char *)script;
	argv[2] = cbuf;
	argv[3] = nbuf;
	argv[4] = "--";
	memcpy(argv + 5, wrapped, n * sizeof *argv);
	lat_reset(count);
	int status;
	char *out = capture(argv, &status);
	free(argv);
	double seconds;
	unsigned failed, got;
	char *p = out;
	int used = 0;
	if (!out || status != 0 || sscanf(p, "%lf %u %u%n", &seconds, &failed, &got, &used) != 3) {
		s->ok = false;
		snprintf(s->error, sizeof s->error, "%s %s exited with status 0x%x", interp, script, status);
		free(out);
		return;
	}
	p += used;
	for (unsigned i = 0; i < got && nlat < count; i++) {
		char *end;
		double v = strtod(p, &end);
		if (end == p)
			break;
		lat[nlat++] = v;
		p = end;
	}
	free(out);
	sample_finish(s, seconds);
	s->failed = failed;
	if (failed)
		snprintf(s->error, sizeof s->error, "%u runs did not exit 0", failed);
}

/* ------------------------------------------------------------ machine */

static struct machine {
	long ncpu;
	char kernel[128], cpu[256], mem[64], date[64];
	double load_start, load_end;
} mach;

static void machine_read(void)
{
	mach.ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	struct utsname u;
	if (uname(&u) == 0)
		copy_text(mach.kernel, sizeof mach.kernel, u.release);
	read_line("/proc/cpuinfo", "model name", mach.cpu, sizeof mach.cpu);
	char mem[64];
	read_line("/proc/meminfo", "MemTotal", mem, sizeof mem);
	snprintf(mach.mem, sizeof mach.mem, "%.1f GiB", strtod(mem, NULL) / (1024.0 * 1024.0));
	time_t t = time(NULL);
	strftime(mach.date, sizeof mach.date, "%Y-%m-%d %H:%M UTC", gmtime(&t));
	mach.load_start = loadavg1();
}

/* ---------------------------------------------------------- the sandboxes */

enum method {
	M_FLOOR,
	M_PASSTHROUGH,
	M_NATIVE,
	M_LANDLOCK,
	M_BWRAP_BARE,
	M_SBX_BWRAP,
	M_PYTHON,
	M_NODE,
	M_COUNT
};

static const struct {
	const char *key, *label;
	int baseline; /* -1: none */
} methods[M_COUNT] = {
	[M_FLOOR] = { "floor", "floor: posix_spawn+pidfd loop", -1 },
	[M_PASSTHROUGH] = { "sbx_passthrough", "sbx passthrough", M_FLOOR },
	[M_NATIVE] = { "sbx_native", "sbx native", M_FLOOR },
	[M_LANDLOCK] = { "sbx_landlock", "sbx landlock", M_FLOOR },
	[M_BWRAP_BARE] = { "bwrap_bare", "bwrap by the bare loop", M_FLOOR },
	[M_SBX_BWRAP] = { "sbx_bwrap", "sbx bwrap", M_BWRAP_BARE },
	[M_PYTHON] = { "python_asyncio", "Python asyncio + bwrap", M_BWRAP_BARE },
	[M_NODE] = { "node_spawn", "Node child_process + bwrap", M_BWRAP_BARE },
};

static sbx_sandbox *sandbox[M_COUNT];  /* for the sbx methods */
static bool avail[M_COUNT];
static char why_not[M_COUNT][512];
static char py_script[PATH_MAX], js_script[PATH_MAX];

static bool uses_bwrap(enum method m)
{
	return m == M_BWRAP_BARE || m == M_SBX_BWRAP || m == M_PYTHON || m == M_NODE;
}

static sbx_sandbox *sandbox_make(enum sbx_backend be, const sbx_policy *policy, char *why,
                                 size_t size)
{
	sbx_sandbox_options so;
	sbx_sandbox_options_init(&so);
	so.backend = be;
	sbx_policy *p = policy ? NULL : sbx_policy_new();
	sbx_sandbox *sb = NULL;
	sbx_error err;
	if (sbx_sandbox_new(base, policy ? policy : p, &so, &sb, &err) < 0) {
		copy_text(why, size, err.message);
		sb = NULL;
	}
	sbx_policy_free(p);
	return sb;
}

static void sandboxes_open(void)
{
	static const enum sbx_backend be[M_COUNT] = {
		[M_PASSTHROUGH] = SBX_BACKEND_PASSTHROUGH, [M_NATIVE] = SBX_BACKEND_NATIVE,
		[M_LANDLOCK] = SBX_BACKEND_LANDLOCK, [M_SBX_BWRAP] = SBX_BACKEND_BWRAP,
	};
	avail[M_FLOOR] = true;
	for (int m = 0; m < M_COUNT; m++) {
		if (!be[m])
			continue;
		sandbox[m] = sandbox_make(be[m], NULL, why_not[m], sizeof why_not[m]);
		avail[m] = sandbox[m] != NULL;
	}
	/* The other bwrap methods spawn the command line of sbx's bwrap sandbox. */
	avail[M_BWRAP_BARE] = avail[M_PYTHON] = avail[M_NODE] = avail[M_SBX_BWRAP];
	for (int m = M_BWRAP_BARE; m <= M_NODE; m++)
		if (!avail[m] && m != M_SBX_BWRAP)
			memcpy(why_not[m], why_not[M_SBX_BWRAP], sizeof why_not[m]);
	snprintf(py_script, sizeof py_script, "%s/competitor.py", cfg.scripts);
	snprintf(js_script, sizeof js_script, "%s/competitor.js", cfg.scripts);
	if (access(cfg.python, X_OK) < 0 || access(py_script, R_OK) < 0) {
		avail[M_PYTHON] = false;
		snprintf(why_not[M_PYTHON], sizeof why_not[M_PYTHON], "%.200s or %.200s is missing",
		         cfg.python, py_script);
	}
	if (access(cfg.node, X_OK) < 0 || access(js_script, R_OK) < 0) {
		avail[M_NODE] = false;
		snprintf(why_not[M_NODE], sizeof why_not[M_NODE], "%.200s or %.200s is missing",
		         cfg.node, js_script);
	}
}

/* The bwrap command line sbx itself would spawn for |argv| (caller frees). */
static sbx_wrapped *wrap_bwrap(const char *const *argv)
{
	if (!sandbox[M_SBX_BWRAP])
		return NULL;
	sbx_run_options o;
	sbx_run_options_init(&o);
	o.argv = argv;
	sbx_wrapped *w = NULL;
	sbx_error err;
	if (sbx_sandbox_wrap(sandbox[M_SBX_BWRAP], &o, &w, &err) < 0)
		die("sbx_sandbox_wrap: %s", err.message);
	return w;
}

/* ---------------------------------------------------------------- spawn */

struct prog {
	const char *name;
	const char *argv[2];
	sbx_wrapped *wrapped;
};

static struct prog progs[MAX_PROGRAMS];
static int nprogs;
/* [program][concurrency][method][repeat] */
static struct sample spawn_s[MAX_PROGRAMS][NCONC][M_COUNT][MAX_REPEATS];

static void measure(enum method m, struct prog *p, unsigned conc, unsigned count, struct sample *s)
{
	memset(s, 0, sizeof *s);
	switch (m) {
	case M_FLOOR:
		bare_loop((char *const *)p->argv, conc, count, s);
		break;
	case M_BWRAP_BARE:
		bare_loop(p->wrapped->argv, conc, count, s);
		break;
	case M_PASSTHROUGH:
	case M_NATIVE:
	case M_LANDLOCK:
	case M_SBX_BWRAP:
		sbx_loop(sandbox[m], p->argv, conc, count, s);
		break;
	case M_PYTHON:
		competitor(cfg.python, py_script, p->wrapped->argv, conc, count, s);
		break;
	case M_NODE:
		competitor(cfg.node, js_script, p->wrapped->argv, conc, count, s);
		break;
	case M_COUNT:
		break;
	}
}

static unsigned count_for(enum method m, int ci)
{
	unsigned n = uses_bwrap(m) ? cfg.n_bwrap[ci] : cfg.n_fast[ci];
	return n < concurrency[ci] ? concurrency[ci] : n;
}

/*
 * How often a method is measured.  The cheap ones (a run in a millisecond or
 * so) are measured more often and in shorter stretches, so that a
 * neighbour's burst of work spoils one pair of measurements, not the median.
 */
static int nrep(int m, int ci)
{
	if (!uses_bwrap((enum method)m))
		return cfg.repeats_fast;
	return concurrency[ci] < 256 ? cfg.repeats_bwrap : cfg.repeats;
}

/* Per-repeat ratios of runs/s to the baseline's, paired by repeat. */
static struct stat3 ratio_of(int pi, int ci, int m)
{
	double r[MAX_REPEATS];
	int b = methods[m].baseline;
	int n = nrep(m, ci) < nrep(b, ci) ? nrep(m, ci) : nrep(b, ci);
	for (int k = 0; k < n; k++) {
		const struct sample *x = &spawn_s[pi][ci][m][k], *y = &spawn_s[pi][ci][b][k];
		r[k] = x->ok && y->ok && y->rps > 0 ? x->rps / y->rps : NAN;
	}
	return stat3_of(r, n);
}

static struct stat3 field_of(int pi, int ci, int m, int which)
{
	double v[MAX_REPEATS];
	for (int k = 0; k < nrep(m, ci); k++) {
		const struct sample *x = &spawn_s[pi][ci][m][k];
		v[k] = !x->ok ? NAN : which == 0 ? x->rps : which == 1 ? x->p50 : x->p99;
	}
	return stat3_of(v, nrep(m, ci));
}

static void spawn_section(void)
{
	printf("\n== spawn: runs/s and latency; %d repeats (bwrap: %d, %d at concurrency 256); ratios "
	       "are medians of per-repeat ratios to the baseline [min-max]\n", cfg.repeats_fast,
	       cfg.repeats_bwrap, cfg.repeats);
	for (int m = 0; m < M_COUNT; m++)
		if (!avail[m])
			printf("   %s: not available: %s\n", methods[m].label, why_not[m]);
	for (int pi = 0; pi < nprogs; pi++) {
		struct prog *p = &progs[pi];
		/* Warm caches and check that every method works before timing it. */
		for (int m = 0; m < M_COUNT; m++) {
			if (!avail[m] || !(cfg.methods & (1u << m)) || m == M_PYTHON || m == M_NODE)
				continue;
			struct sample s;
			measure((enum method)m, p, 2, 6, &s);
			if (!s.ok || s.failed) {
				avail[m] = false;
				snprintf(why_not[m], sizeof why_not[m], "runs failed: %s", s.error);
				printf("   %s: not available: %s\n", methods[m].label, why_not[m]);
			}
		}
		fflush(stdout);
		for (int ci = 0; ci < NCONC; ci++) {
			int rounds = 0;
			for (int m = 0; m < M_COUNT; m++)
				rounds = nrep(m, ci) > rounds ? nrep(m, ci) : rounds;
			for (int r = 0; r < rounds; r++) {
				for (int k = 0; k < M_COUNT; k++) {
					int m = (k + r) % M_COUNT;
					if (avail[m] && (cfg.methods & (1u << m)) && r < nrep(m, ci))
						measure((enum method)m, p, concurrency[ci], count_for((enum method)m, ci),
						        &spawn_s[pi][ci][m][r]);
				}
			}
		}
		printf("\n-- program %s\n", p->name);
		printf("%5s  %-29s %8s  %-18s %8s %6s %8s %6s  %s\n", "conc", "method", "runs/s",
		       "x baseline", "p50 ms", "x", "p99 ms", "x", "baseline");
		for (int ci = 0; ci < NCONC; ci++) {
			for (int m = 0; m < M_COUNT; m++) {
				if (!(cfg.methods & (1u << m)))
					continue;
				if (!avail[m]) {
					if (m == M_NATIVE || m == M_LANDLOCK)
						printf("%5u  %-29s %s\n", concurrency[ci], methods[m].label,
						       "not available");
					continue;
				}
				struct stat3 rps = field_of(pi, ci, m, 0), p50 = field_of(pi, ci, m, 1),
				             p99 = field_of(pi, ci, m, 2);
				unsigned failed = 0;
				for (int r = 0; r < nrep(m, ci); r++)
					failed += spawn_s[pi][ci][m][r].failed;
				int b = methods[m].baseline;
				char ratio[64] = "1 (baseline)";
				double x50 = 1, x99 = 1;
				if (b >= 0 && avail[b] && (cfg.methods & (1u << b))) {
					struct stat3 q = ratio_of(pi, ci, m);
					snprintf(ratio, sizeof ratio, "%.2f [%.2f-%.2f]", q.med, q.lo, q.hi);
					x50 = p50.med / field_of(pi, ci, b, 1).med;
					x99 = p99.med / field_of(pi, ci, b, 2).med;
				}
				printf("%5u  %-29s %8.0f  %-18s %8.2f %6.2f %8.2f %6.2f  %s", concurrency[ci],
				       methods[m].label, rps.med, ratio, 1e3 * p50.med, x50, 1e3 * p99.med, x99,
				       b >= 0 ? methods[b].key : "-");
				if (failed)
					printf("  (%u FAILED)", failed);
				printf("\n");
			}
		}
		fflush(stdout);
	}
}

/* ------------------------------------------------------------ the probe */

/*
 * A 10 ms timer on the loop that notes how late it fires: the time a run's
 * events wait behind others.  It re-arms itself from the current time, so a
 * late firing is counted once and does not pile up.
 */
enum phase { PH_IDLE, PH_START, PH_STEADY, PH_END, PH_COUNT };
static const char *const phase_name[PH_COUNT] = { "idle", "starting", "steady", "ending" };

#define PROBE_INTERVAL 0.010

static struct probe {
	struct event *ev;
	double expected;
	int phase;
	double *v[PH_COUNT];
	size_t n[PH_COUNT], cap;
} probe;

static void probe_arm(void)
{
	event_base_update_cache_time(base);
	probe.expected = now() + PROBE_INTERVAL;
	struct timeval tv = { 0, (suseconds_t)(PROBE_INTERVAL * 1e6) };
	event_add(probe.ev, &tv);
}

static void on_probe(evutil_socket_t fd, short what, void *arg)
{
	(void)fd, (void)what, (void)arg;
	double late = now() - probe.expected;
	int ph = probe.phase;
	if (probe.n[ph] < probe.cap)
		probe.v[ph][probe.n[ph]++] = late > 0 ? late : 0;
	probe_arm();
}

static void probe_start(void)
{
	if (!probe.ev) {
		probe.cap = 200000;
		for (int i = 0; i < PH_COUNT; i++) {
			probe.v[i] = xcalloc(probe.cap, sizeof(double));
			memset(probe.v[i], 0, probe.cap * sizeof(double)); /* resident before measuring */
		}
		probe.ev = event_new(base, -1, 0, on_probe, NULL);
	}
	for (int i = 0; i < PH_COUNT; i++)
		probe.n[i] = 0;
	probe.phase = PH_IDLE;
	probe_arm();
}

static void probe_stop(void)
{
	event_del(probe.ev);
}

/* ---------------------------------------------------------------- scale */

/* One sleeping run: its handle while it runs, and whether it said it is up. */
struct srun {
	sbx_run *run;
	bool up, done;
};

static unsigned s_up, s_done, s_failed;
static char s_error[256];

static void on_up(enum sbx_stream stream, const char *data, size_t len, void *arg)
{
	(void)stream, (void)data, (void)len;
	struct srun *r = arg;
	if (!r->up) {
		r->up = true;
		s_up++;
	}
}

static void on_sleeper_done(sbx_result *res, void *arg)
{
	struct srun *r = arg;
	r->run = NULL;
	r->done = true;
	s_done++;
	if (!r->up) {
		s_failed++;
		copy_text(s_error, sizeof s_error, res->error ? res->error :
		         res->out[SBX_STDERR].len ? res->out[SBX_STDERR].data : "ended before it was up");
	}
	sbx_result_free(res);
}

static const char *sleeper_argv[3];

/* Submits |n| sleepers to |sb| at once, as a caller with a burst of work would. */
static unsigned sleepers_start(sbx_sandbox *sb, struct srun *runs, unsigned n)
{
	s_up = s_done = s_failed = 0;
	s_error[0] = '\0';
	unsigned started = 0;
	for (unsigned i = 0; i < n; i++) {
		runs[i] = (struct srun){ 0 };
		sbx_run_options o;
		sbx_run_options_init(&o);
		o.argv = sleeper_argv;
		o.timeout = 0;
		o.max_output = 0; /* "up" is seen through on_output and not kept */
		o.on_output = on_up;
		o.on_output_arg = &runs[i];
		sbx_error err;
		if (sbx_run_start(sb, &o, on_sleeper_done, &runs[i], &runs[i].run, &err) < 0) {
			copy_text(s_error, sizeof s_error, err.message);
			break;
		}
		started++;
	}
	return started;
}

/* Kills the sleepers by pid (they are this process's children) and waits for every callback. */
static double sleepers_stop(struct srun *runs, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		if (runs[i].run && !runs[i].done) {
			int pid = sbx_run_pid(runs[i].run);
			if (pid > 0)
				kill(pid, SIGKILL);
			else
				sbx_run_cancel(runs[i].run);
		}
	}
	double t0 = now();
	if (!loop_until(&s_done, n, 300))
		die("%u of %u runs did not end within 300 s of SIGKILL", n - s_done, n);
	return now() - t0;
}

struct scale_result {
	bool ok;
	const char *backend;
	unsigned want, runs;
	double start_seconds, end_seconds, start_cpu;
	double rss_per_run, rss_steady_per_run, heap_per_run, fds_per_run, kernel_per_run;
	double p99[PH_COUNT], p50[PH_COUNT], max[PH_COUNT];
	size_t samples[PH_COUNT];
	/* The bare loop starting as many sleepers, holding the same fds. */
	bool floor_ok;
	int floor_runs; /* the figures below are sums over these */
	double floor_start_seconds, floor_start_cpu, floor_rss_per_run, floor_heap_per_run;
	char error[256];
};
static struct scale_result scale_res[2];
static int nscale;
static rlim_t nofile_hard;

/* Raises RLIMIT_NOFILE for |want| runs of |per_run| fds; returns how many fit. */
static unsigned fd_budget(unsigned want, unsigned per_run)
{
	struct rlimit rl;
	getrlimit(RLIMIT_NOFILE, &rl);
	rlim_t need = (rlim_t)want * per_run + 256;
	if (rl.rlim_cur < need) {
		/* Above the hard limit needs CAP_SYS_RESOURCE; else stay at it. */
		struct rlimit up = { need, need > rl.rlim_max ? need : rl.rlim_max };
		if (setrlimit(RLIMIT_NOFILE, &up) < 0) {
			rl.rlim_cur = rl.rlim_max;
			setrlimit(RLIMIT_NOFILE, &rl);
		}
		getrlimit(RLIMIT_NOFILE, &rl);
	}
	nofile_hard = rl.rlim_max;
	if (rl.rlim_cur < need)
		return (unsigned)((rl.rlim_cur - 256) / per_run);
	return want;
}

static bool bare_sleepers(char *const *argv, unsigned n, struct bslot *s, bool start);

/* The bare loop starts |n| sleepers; the figures are summed over the calls. */
static void scale_floor(unsigned n, struct bslot *bs, struct scale_result *res)
{
	long rss0 = rss_bytes(), heap0 = heap_bytes();
	double t0 = now(), c0 = cpu_seconds();
	res->floor_ok = bare_sleepers((char *const *)sleeper_argv, n, bs, true);
	res->floor_start_seconds += now() - t0;
	res->floor_start_cpu += cpu_seconds() - c0;
	res->floor_rss_per_run += (double)(rss_bytes() - rss0) / n;
	res->floor_heap_per_run += (double)(heap_bytes() - heap0) / n;
	res->floor_runs++;
	bare_sleepers(NULL, n, bs, false);
}

static void scale_one(sbx_sandbox *sb, unsigned want, unsigned fds_each, bool floor_too,
                      struct scale_result *res)
{
	memset(res, 0, sizeof *res);
	res->backend = sbx_sandbox_backend(sb);
	res->want = want;
	unsigned n = fd_budget(want, fds_each);
	res->runs = n;
	if (n < want)
		printf("   RLIMIT_NOFILE (hard limit %llu, not raisable here) holds %u fds per run for "
		       "only %u runs of %u\n", (unsigned long long)nofile_hard, fds_each, n, want);
	struct srun *runs = xcalloc(n, sizeof *runs);
	struct bslot *bs = xcalloc(n, sizeof *bs);
	memset(runs, 0, n * sizeof *runs); /* resident before measuring */
	memset(bs, 0, n * sizeof *bs);

	if (floor_too)
		scale_floor(n, bs, res);

	probe_start();
	loop_for(cfg.idle_seconds);
	/* Everything the harness keeps is allocated: what grows now is sbx's. */
	long rss0 = rss_bytes(), heap0 = heap_bytes(), fds0 = count_fds();
	long long k0 = meminfo_kernel();
	double t0 = now(), c0 = cpu_seconds();
	probe.phase = PH_START;
	unsigned started = sleepers_start(sb, runs, n);
	bool all_up = loop_until(&s_up, started, 600) && started == n;
	res->start_seconds = now() - t0;
	res->start_cpu = cpu_seconds() - c0;
	long rss1 = rss_bytes(), heap1 = heap_bytes(), fds1 = count_fds();
	long long k1 = meminfo_kernel();
	probe.phase = PH_STEADY;
	loop_for(cfg.steady_seconds);
	long rss2 = rss_bytes();
	if (!all_up) {
		int len = snprintf(res->error, sizeof res->error, "%u of %u runs came up: ", s_up, n);
		copy_text(res->error + len, sizeof res->error - (size_t)len, s_error);
	}
	/* The kills are the harness's: the probe starts afresh after them. */
	probe_stop();
	for (unsigned i = 0; i < n; i++)
		if (runs[i].run && sbx_run_pid(runs[i].run) > 0)
			kill(sbx_run_pid(runs[i].run), SIGKILL);
	probe.phase = PH_END;
	probe_arm();
	res->end_seconds = sleepers_stop(runs, started);
	probe_stop();
	/* The floor again, so that a neighbour's burst of work does not land on one side only. */
	if (floor_too)
		scale_floor(n, bs, res);
	res->ok = all_up;
	res->rss_per_run = (double)(rss1 - rss0) / n;
	res->rss_steady_per_run = (double)(rss2 - rss0) / n;
	res->heap_per_run = (double)(heap1 - heap0) / n;
	res->fds_per_run = (double)(fds1 - fds0) / n;
	res->kernel_per_run = (double)(k1 - k0) / n;
	for (int ph = 0; ph < PH_COUNT; ph++) {
		res->samples[ph] = probe.n[ph];
		res->p50[ph] = percentile(probe.v[ph], probe.n[ph], 0.50);
		res->p99[ph] = percentile(probe.v[ph], probe.n[ph], 0.99);
		res->max[ph] = percentile(probe.v[ph], probe.n[ph], 1.0);
	}
	free(runs);
	free(bs);
}

static void scale_print(const struct scale_result *r)
{
	printf("\n-- %u sleeping runs, backend %s%s%s\n", r->runs, r->backend, r->ok ? "" : ": ",
	       r->ok ? "" : r->error);
	printf("   all up in %.2f s (%.0f runs/s, %.0f us CPU per start); all ended %.2f s after "
	       "SIGKILL\n", r->start_seconds, r->runs / r->start_seconds,
	       1e6 * r->start_cpu / r->runs, r->end_seconds);
	if (r->floor_ok)
		printf("   the bare loop started as many in %.2f s (mean of %d, before and after; %.0f us "
		       "CPU per start): sbx's start rate x floor %.2f\n",
		       r->floor_start_seconds / r->floor_runs, r->floor_runs,
		       1e6 * r->floor_start_cpu / r->floor_runs / r->runs,
		       r->floor_start_seconds / r->floor_runs / r->start_seconds);
	printf("   parent memory per run: heap %.0f B, RSS %.0f B (%.0f B after %.0f s steady); "
	       "x goal %.0f B: %.2f (heap), %.2f (RSS)\n",
	       r->heap_per_run, r->rss_per_run, r->rss_steady_per_run, cfg.steady_seconds,
	       GOAL_BYTES_PER_RUN, r->heap_per_run / GOAL_BYTES_PER_RUN,
	       r->rss_per_run / GOAL_BYTES_PER_RUN);
	printf("   parent fds per run: %.2f (x the bare loop's 3: %.2f); kernel memory per run "
	       "(/proc/meminfo Slab+KernelStack+PageTables, whole machine): %.1f KiB\n",
	       r->fds_per_run, r->fds_per_run / 3, r->kernel_per_run / 1024);
	printf("   loop lateness (10 ms timer probe), ms:%10s %8s %8s %8s  x idle p99\n", "p50", "p99",
	       "max", "samples");
	for (int ph = 0; ph < PH_COUNT; ph++)
		printf("   %38s %8.2f %8.2f %8.2f %8zu  %.1f\n", phase_name[ph], 1e3 * r->p50[ph],
		       1e3 * r->p99[ph], 1e3 * r->max[ph], r->samples[ph],
		       r->p99[PH_IDLE] > 0 ? r->p99[ph] / r->p99[PH_IDLE] : NAN);
}

static void scale_section(void)
{
	printf("\n== scale: sleeping runs (bench/tiny sleep) on one loop, all submitted at once; "
	       "phases: idle loop (baseline), starting, steady, ending (after SIGKILL to all)\n");
	fflush(stdout);
	if (sandbox[M_PASSTHROUGH]) {
		scale_one(sandbox[M_PASSTHROUGH], cfg.scale_runs, 3, true, &scale_res[nscale]);
		scale_print(&scale_res[nscale++]);
	}
	if (cfg.scale_bwrap_runs && avail[M_SBX_BWRAP]) {
		scale_one(sandbox[M_SBX_BWRAP], cfg.scale_bwrap_runs, 5, false, &scale_res[nscale]);
		scale_print(&scale_res[nscale++]);
	}
	fflush(stdout);
}

/* --------------------------------------------------------------- output */

enum drain_kind { D_BARE, D_BARE_KEEP, D_SBX_KEEP, D_SBX_CAP, D_COUNT };
static const struct {
	const char *key, *label;
} drains[D_COUNT] = {
	[D_BARE] = { "bare_read_loop", "bare read() loop (baseline)" },
	[D_BARE_KEEP] = { "bare_read_loop_keep", "bare read() loop keeping it all" },
	[D_SBX_KEEP] = { "sbx_keep_all", "sbx, max_output 1 GiB+ (keeps all)" },
	[D_SBX_CAP] = { "sbx_capped", "sbx, max_output 1 MiB (discards)" },
};
static double drain_gibs[D_COUNT][MAX_REPEATS];
static bool drain_ok[D_COUNT][MAX_REPEATS];

#define DRAIN_PIPE (256 * 1024)

static const char *writer_argv[4];
static char writer_bytes[32];

static double drain_bare(bool keep, bool *ok)
{
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0)
		die("pipe2: %s", strerror(errno));
	fcntl(p[0], F_SETPIPE_SZ, DRAIN_PIPE);
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, devnull, 0);
	posix_spawn_file_actions_adddup2(&fa, p[1], 1);
	static char *buf;
	if (!buf)
		buf = xcalloc(DRAIN_PIPE, 1);
	char *kept = NULL;
	size_t len = 0, cap = 0;
	double t0 = now();
	pid_t pid;
	int rc = posix_spawn(&pid, writer_argv[0], &fa, NULL, (char *const *)writer_argv, child_env);
	posix_spawn_file_actions_destroy(&fa);
	close(p[1]);
	if (rc)
		die("posix_spawn %s: %s", writer_argv[0], strerror(rc));
	uint64_t total = 0;
	for (;;) {
		ssize_t n = read(p[0], buf, DRAIN_PIPE);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		total += (uint64_t)n;
		if (keep) {
			if (len + (size_t)n > cap) {
				cap = cap ? cap * 2 : 4096;
				while (cap < len + (size_t)n)
					cap *= 2;
				char *k2 = realloc(kept, cap);
				if (!k2)
					die("out of memory");
				kept = k2;
			}
			memcpy(kept + len, buf, (size_t)n);
			len += (size_t)n;
		}
	}
	close(p[0]);
	int status;
	reap(pid, &status);
	double t = now() - t0;
	free(kept);
	*ok = total == cfg.output_bytes && WIFEXITED(status) && WEXITSTATUS(status) == 0;
	return (double)total / t / (1024.0 * 1024 * 1024);
}

static unsigned d_done;
static uint64_t d_total;
static bool d_good;

static void on_drained(sbx_result *r, void *arg)
{
	(void)arg;
	d_total = r->out[SBX_STDOUT].total;
	d_good = r->exited && r->exit_code == 0;
	d_done = 1;
	sbx_result_free(r);
}

static double drain_sbx(size_t max_output, bool *ok)
{
	sbx_run_options o;
	sbx_run_options_init(&o);
	o.argv = writer_argv;
	o.max_output = max_output;
	o.timeout = 0;
	d_done = 0;
	sbx_error err;
	double t0 = now();
	if (sbx_run_start(sandbox[M_PASSTHROUGH], &o, on_drained, NULL, NULL, &err) < 0)
		die("sbx_run_start: %s", err.message);
	loop_until(&d_done, 1, 600);
	double t = now() - t0;
	*ok = d_done && d_good && d_total == cfg.output_bytes;
	return (double)d_total / t / (1024.0 * 1024 * 1024);
}

static void output_section(void)
{
	snprintf(writer_bytes, sizeof writer_bytes, "%llu", (unsigned long long)cfg.output_bytes);
	writer_argv[0] = cfg.tiny;
	writer_argv[1] = "write";
	writer_argv[2] = writer_bytes;
	printf("\n== output: one run writing %.2f GiB (bench/tiny write, 1 MiB writes) through a "
	       "pipe; %d repeats\n", (double)cfg.output_bytes / (1 << 30), cfg.repeats);
	fflush(stdout);
	for (int r = 0; r < cfg.repeats; r++) {
		for (int k = 0; k < D_COUNT; k++) {
			int d = (k + r) % D_COUNT;
			bool ok = false;
			switch (d) {
			case D_BARE:
				drain_gibs[d][r] = drain_bare(false, &ok);
				break;
			case D_BARE_KEEP:
				drain_gibs[d][r] = drain_bare(true, &ok);
				break;
			case D_SBX_KEEP:
				drain_gibs[d][r] = drain_sbx((size_t)cfg.output_bytes + 1, &ok);
				break;
			case D_SBX_CAP:
				drain_gibs[d][r] = drain_sbx(1024 * 1024, &ok);
				break;
			}
			drain_ok[d][r] = ok;
		}
	}
	printf("   %-38s %8s  %s\n", "", "GiB/s", "x bare read() loop [min-max]");
	for (int d = 0; d < D_COUNT; d++) {
		double ratio[MAX_REPEATS];
		bool ok = true;
		for (int r = 0; r < cfg.repeats; r++) {
			ratio[r] = drain_gibs[d][r] / drain_gibs[D_BARE][r];
			ok = ok && drain_ok[d][r];
		}
		struct stat3 g = stat3_of(drain_gibs[d], cfg.repeats), q = stat3_of(ratio, cfg.repeats);
		printf("   %-38s %8.2f  %.2f [%.2f-%.2f]%s\n", drains[d].label, g.med, q.med, q.lo, q.hi,
		       ok ? "" : "  (WRONG BYTE COUNT OR STATUS)");
	}
	fflush(stdout);
}

/* ------------------------------------------------------------- watchdog */

static double wd_pct[2][MAX_REPEATS]; /* [0] without, [1] with the watchdog */
static unsigned wd_runs_up[2];

static void watchdog_section(void)
{
	printf("\n== watchdog: %u sleeping runs for %d windows of %.1f s, with and without the "
	       "memory watchdog (--memory-strategy watchdog, 4 Hz)\n", cfg.wd_runs, cfg.repeats,
	       cfg.wd_seconds);
	fflush(stdout);
	sbx_policy *pol = sbx_policy_new();
	sbx_error err;
	if (!pol || sbx_policy_set_memory(pol, 1ULL << 30, &err) < 0 ||
	    sbx_policy_set_memory_strategy(pol, SBX_MEMORY_WATCHDOG, &err) < 0)
		die("policy: %s", err.message);
	char why[512];
	sbx_sandbox *wd = sandbox_make(SBX_BACKEND_PASSTHROUGH, pol, why, sizeof why);
	sbx_policy_free(pol);
	if (!wd)
		die("sandbox: %s", why);
	unsigned n = fd_budget(cfg.wd_runs, 4);
	struct srun *runs = xcalloc(n, sizeof *runs);
	for (int with = 0; with < 2; with++) {
		sbx_sandbox *sb = with ? wd : sandbox[M_PASSTHROUGH];
		unsigned started = sleepers_start(sb, runs, n);
		loop_until(&s_up, started, 300);
		wd_runs_up[with] = s_up;
		loop_for(0.5); /* let the watchdog find the trees */
		for (int r = 0; r < cfg.repeats; r++) {
			double c0 = cpu_seconds(), t0 = now();
			loop_for(cfg.wd_seconds);
			wd_pct[with][r] = 100 * (cpu_seconds() - c0) / (now() - t0);
		}
		sleepers_stop(runs, started);
	}
	free(runs);
	sbx_sandbox_free(wd);
	double net[MAX_REPEATS];
	for (int r = 0; r < cfg.repeats; r++)
		net[r] = wd_pct[1][r] - wd_pct[0][r];
	struct stat3 q = stat3_of(net, cfg.repeats), b = stat3_of(wd_pct[0], cfg.repeats);
	printf("   loop with %u idle runs, no watchdog (baseline): %.3f%% of one core\n",
	       wd_runs_up[0], b.med);
	printf("   the watchdog over it: %.3f%% of one core [%.3f-%.3f]; x goal (%.0f%%): %.2f\n",
	       q.med, q.lo, q.hi, GOAL_WATCHDOG_PERCENT, q.med / GOAL_WATCHDOG_PERCENT);
	fflush(stdout);
}

/* --------------------------------------------------------------- memory */

/*
 * Kernel memory of this process and its children, from a memory cgroup of
 * our own (v1: memory.kmem.usage_in_bytes, and memory.usage_in_bytes for
 * everything charged); where there is none, /proc/meminfo for the whole
 * machine, which other users' work disturbs.
 */
static char cg_self[PATH_MAX], cg_parent[PATH_MAX];
static bool cg_on;

static bool write_file(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	bool ok = write(fd, text, strlen(text)) == (ssize_t)strlen(text);
	close(fd);
	return ok;
}

static long long cg_read(const char *file)
{
	char path[PATH_MAX + 64];
	snprintf(path, sizeof path, "%s/%s", cg_self, file);
	long long v = -1;
	FILE *f = fopen(path, "r");
	if (f) {
		if (fscanf(f, "%lld", &v) != 1)
			v = -1;
		fclose(f);
	}
	return v;
}

static void cg_enter(void)
{
	FILE *f = fopen("/proc/self/cgroup", "r");
	char line[PATH_MAX], rel[PATH_MAX] = "";
	while (f && fgets(line, sizeof line, f)) {
		char *a = strchr(line, ':'), *b = a ? strchr(a + 1, ':') : NULL;
		if (a && b && strncmp(a + 1, "memory:", 7) == 0) {
			b[1 + strcspn(b + 1, "\n")] = '\0';
			snprintf(rel, sizeof rel, "%s", b + 1);
		}
	}
	if (f)
		fclose(f);
	if (!rel[0])
		return;
	int plen = snprintf(cg_parent, sizeof cg_parent, "/sys/fs/cgroup/memory");
	copy_text(cg_parent + plen, sizeof cg_parent - (size_t)plen, strcmp(rel, "/") == 0 ? "" : rel);
	int n = snprintf(cg_self, sizeof cg_self, "%s/sbxbench-%d", cg_parent, (int)getpid());
	if (n < 0 || (size_t)n >= sizeof cg_self)
		return;
	if (mkdir(cg_self, 0755) < 0 && errno != EEXIST)
		return;
	char pid[32];
	snprintf(pid, sizeof pid, "%d", (int)getpid());
	char procs[PATH_MAX + 32];
	snprintf(procs, sizeof procs, "%s/cgroup.procs", cg_self);
	if (!write_file(procs, pid) || cg_read("memory.kmem.usage_in_bytes") < 0) {
		rmdir(cg_self);
		return;
	}
	cg_on = true;
}

static void cg_leave(void)
{
	if (!cg_on)
		return;
	char pid[32], procs[PATH_MAX + 32];
	snprintf(pid, sizeof pid, "%d", (int)getpid());
	snprintf(procs, sizeof procs, "%s/cgroup.procs", cg_parent);
	write_file(procs, pid);
	for (int i = 0; i < 50 && rmdir(cg_self) < 0 && errno == EBUSY; i++)
		usleep(20000);
	cg_on = false;
}

static long long kernel_bytes(void)
{
	return cg_on ? cg_read("memory.kmem.usage_in_bytes") : meminfo_kernel();
}

/*
 * Waits until the kernel has given back what the last runs held: a network
 * namespace, for one, is freed by a worker some time after its last process
 * dies, and an uncharge landing inside the next measurement would make it
 * negative.  At most 5 s.
 */
static void kernel_settle(void)
{
	long long prev = kernel_bytes();
	for (int i = 0; i < 50; i++) {
		loop_for(0.1);
		long long cur = kernel_bytes();
		if (llabs(cur - prev) < 64 * 1024)
			return;
		prev = cur;
	}
}

enum mem_kind { K_FLOOR, K_PASSTHROUGH, K_BWRAP_BARE, K_SBX_BWRAP, K_COUNT };
static const struct {
	const char *key, *label;
} mems[K_COUNT] = {
	[K_FLOOR] = { "floor", "floor: bare loop, no sandbox" },
	[K_PASSTHROUGH] = { "sbx_passthrough", "sbx passthrough" },
	[K_BWRAP_BARE] = { "bwrap_bare", "bwrap by the bare loop" },
	[K_SBX_BWRAP] = { "sbx_bwrap", "sbx bwrap" },
};
static struct memres {
	bool ok;
	double kernel[MAX_REPEATS], total[MAX_REPEATS], heap[MAX_REPEATS], rss[MAX_REPEATS],
	       fds[MAX_REPEATS];
} memres[K_COUNT];

/* Idle sleepers spawned by the bare loop, each with its pipes and pidfd held. */
static bool bare_sleepers(char *const *argv, unsigned n, struct bslot *s, bool start)
{
	posix_spawnattr_t attr;
	posix_spawnattr_init(&attr);
	posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSID);
	bool ok = true;
	for (unsigned i = 0; start && i < n; i++) {
		int out[2], err[2];
		if (pipe2(out, O_CLOEXEC) < 0 || pipe2(err, O_CLOEXEC) < 0)
			die("pipe2: %s", strerror(errno));
		posix_spawn_file_actions_t fa;
		posix_spawn_file_actions_init(&fa);
		posix_spawn_file_actions_adddup2(&fa, devnull, 0);
		posix_spawn_file_actions_adddup2(&fa, out[1], 1);
		posix_spawn_file_actions_adddup2(&fa, err[1], 2);
		int rc = posix_spawn(&s[i].pid, argv[0], &fa, &attr, argv, child_env);
		posix_spawn_file_actions_destroy(&fa);
		close(out[1]);
		close(err[1]);
		if (rc)
			die("posix_spawn: %s", strerror(rc));
		s[i].fd[0] = out[0];
		s[i].fd[1] = err[0];
		s[i].pidfd = pidfd_open_(s[i].pid);
	}
	for (unsigned i = 0; start && i < n; i++) {
		char up[2];
		if (read(s[i].fd[0], up, 2) != 2)
			ok = false;
	}
	for (unsigned i = 0; !start && i < n; i++) {
		kill(s[i].pid, SIGKILL);
		reap(s[i].pid, NULL);
		close(s[i].fd[0]);
		close(s[i].fd[1]);
		close(s[i].pidfd);
	}
	posix_spawnattr_destroy(&attr);
	return ok;
}

static void memory_section(void)
{
	cg_enter();
	printf("\n== memory: %u idle runs (bench/tiny sleep) per backend, %d repeats; kernel memory "
	       "from %s\n", cfg.mem_runs, cfg.repeats,
	       cg_on ? "a memory cgroup of this process (v1 memory.kmem.usage_in_bytes; 'all' is "
	               "memory.usage_in_bytes)"
	             : "/proc/meminfo Slab+KernelStack+PageTables (whole machine: noisy)");
	fflush(stdout);
	unsigned n = cfg.mem_runs;
	struct bslot *bs = xcalloc(n, sizeof *bs);
	struct srun *runs = xcalloc(n, sizeof *runs);
	memset(bs, 0, n * sizeof *bs);
	memset(runs, 0, n * sizeof *runs);
	const char *tiny_sleep[] = { cfg.tiny, "sleep", NULL };
	sbx_wrapped *w = wrap_bwrap(tiny_sleep);
	memres[K_FLOOR].ok = true;
	memres[K_PASSTHROUGH].ok = avail[M_PASSTHROUGH];
	memres[K_BWRAP_BARE].ok = memres[K_SBX_BWRAP].ok = avail[M_SBX_BWRAP] && w;
	for (int r = 0; r < cfg.repeats; r++) {
		for (int j = 0; j < K_COUNT; j++) {
			int k = (j + r) % K_COUNT;
			if (!memres[k].ok)
				continue;
			kernel_settle();
			long long k0 = kernel_bytes(), u0 = cg_on ? cg_read("memory.usage_in_bytes") : 0;
			long h0 = heap_bytes(), rss0 = rss_bytes(), f0 = count_fds();
			bool up = true;
			unsigned started = n;
			if (k == K_FLOOR)
				up = bare_sleepers((char *const *)tiny_sleep, n, bs, true);
			else if (k == K_BWRAP_BARE)
				up = bare_sleepers(w->argv, n, bs, true);
			else {
				started = sleepers_start(sandbox[k == K_SBX_BWRAP ? M_SBX_BWRAP : M_PASSTHROUGH],
				                         runs, n);
				up = loop_until(&s_up, started, 120) && started == n;
				loop_for(0.1);
			}
			long long k1 = kernel_bytes(), u1 = cg_on ? cg_read("memory.usage_in_bytes") : 0;
			long h1 = heap_bytes(), rss1 = rss_bytes(), f1 = count_fds();
			if (k == K_FLOOR || k == K_BWRAP_BARE)
				bare_sleepers(NULL, n, bs, false);
			else
				sleepers_stop(runs, started);
			if (!up) {
				memres[k].ok = false;
				printf("   %s: not all runs came up: %s\n", mems[k].label, s_error);
				continue;
			}
			memres[k].kernel[r] = (double)(k1 - k0) / n;
			memres[k].total[r] = cg_on ? (double)(u1 - u0) / n : NAN;
			memres[k].heap[r] = (double)(h1 - h0) / n;
			memres[k].rss[r] = (double)(rss1 - rss0) / n;
			memres[k].fds[r] = (double)(f1 - f0) / n;
		}
	}
	sbx_wrapped_free(w);
	free(bs);
	free(runs);
	cg_leave();
	printf("   %-30s %10s %-18s %10s %10s %10s %6s\n", "per run", "kernel KiB", "x floor [min-max]",
	       "all KiB", "heap B", "RSS B", "fds");
	for (int k = 0; k < K_COUNT; k++) {
		if (!memres[k].ok) {
			printf("   %-30s not available\n", mems[k].label);
			continue;
		}
		double ratio[MAX_REPEATS];
		for (int r = 0; r < cfg.repeats; r++)
			ratio[r] = memres[k].kernel[r] / memres[K_FLOOR].kernel[r];
		struct stat3 q = stat3_of(ratio, cfg.repeats), kk = stat3_of(memres[k].kernel, cfg.repeats);
		char rs[48];
		snprintf(rs, sizeof rs, "%.2f [%.2f-%.2f]", q.med, q.lo, q.hi);
		printf("   %-30s %10.1f %-18s %10.1f %10.0f %10.0f %6.2f\n", mems[k].label, kk.med / 1024,
		       k == K_FLOOR ? "1 (baseline)" : rs,
		       stat3_of(memres[k].total, cfg.repeats).med / 1024,
		       stat3_of(memres[k].heap, cfg.repeats).med, stat3_of(memres[k].rss, cfg.repeats).med,
		       stat3_of(memres[k].fds, cfg.repeats).med);
	}
	printf("   native, landlock: not available (%s)\n", why_not[M_NATIVE]);
	fflush(stdout);
}

/* ---------------------------------------------------------------- goals */

struct goal {
	char name[96], figure[160];
	int met; /* 1 met, 0 missed, -1 not measured */
};
static struct goal goals[16];
static int ngoals;

static struct goal *goal_add(const char *name)
{
	struct goal *g = &goals[ngoals++];
	snprintf(g->name, sizeof g->name, "%s", name);
	g->met = -1;
	snprintf(g->figure, sizeof g->figure, "not measured");
	return g;
}

static void goals_eval(void)
{
	for (int pi = 0; pi < nprogs && (cfg.sections & S_SPAWN); pi++) {
		char name[96];
		snprintf(name, sizeof name, "passthrough >= %.0f%% of floor runs/s (%s)",
		         100 * GOAL_PASSTHROUGH, progs[pi].name);
		struct goal *g = goal_add(name);
		if (avail[M_PASSTHROUGH] && (cfg.methods & 1u << M_PASSTHROUGH) &&
		    (cfg.methods & 1u << M_FLOOR)) {
			g->met = 1;
			int len = 0;
			for (int ci = 0; ci < NCONC; ci++) {
				struct stat3 q = ratio_of(pi, ci, M_PASSTHROUGH);
				len += snprintf(g->figure + len, sizeof g->figure - (size_t)len, "%sc%u %.2f",
				                ci ? ", " : "", concurrency[ci], q.med);
				if (!(q.med >= GOAL_PASSTHROUGH))
					g->met = 0;
			}
		}
		snprintf(name, sizeof name, "sbx bwrap >= %.0f%% of bwrap by bare loop, ahead of "
		         "Python, Node (%s)", 100 * GOAL_BWRAP, progs[pi].name);
		g = goal_add(name);
		if (avail[M_SBX_BWRAP] && avail[M_BWRAP_BARE] && (cfg.methods & 1u << M_SBX_BWRAP) &&
		    (cfg.methods & 1u << M_BWRAP_BARE)) {
			g->met = 1;
			int len = 0;
			for (int ci = 0; ci < NCONC; ci++) {
				struct stat3 q = ratio_of(pi, ci, M_SBX_BWRAP);
				double sbx = field_of(pi, ci, M_SBX_BWRAP, 0).med;
				double py = avail[M_PYTHON] && (cfg.methods & 1u << M_PYTHON)
				                    ? field_of(pi, ci, M_PYTHON, 0).med : NAN;
				double js = avail[M_NODE] && (cfg.methods & 1u << M_NODE)
				                    ? field_of(pi, ci, M_NODE, 0).med : NAN;
				len += snprintf(g->figure + len, sizeof g->figure - (size_t)len,
				                "%sc%u %.2f (x py %.2f, x node %.2f)", ci ? "; " : "",
				                concurrency[ci], q.med, sbx / py, sbx / js);
				if (!(q.med >= GOAL_BWRAP) || !(sbx > py || isnan(py)) || !(sbx > js || isnan(js)))
					g->met = 0;
			}
		}
	}
	if (cfg.sections & S_OUTPUT) {
		struct goal *g = goal_add("drain >= 75% of a bare read() loop (max_output 1 GiB+)");
		double ratio[MAX_REPEATS], cap[MAX_REPEATS];
		for (int r = 0; r < cfg.repeats; r++) {
			ratio[r] = drain_gibs[D_SBX_KEEP][r] / drain_gibs[D_BARE][r];
			cap[r] = drain_gibs[D_SBX_CAP][r] / drain_gibs[D_BARE][r];
		}
		struct stat3 q = stat3_of(ratio, cfg.repeats), c = stat3_of(cap, cfg.repeats);
		snprintf(g->figure, sizeof g->figure, "%.2f keeping all; %.2f discarding past 1 MiB",
		         q.med, c.med);
		g->met = q.med >= GOAL_DRAIN;
	}
	if (cfg.sections & S_WATCHDOG) {
		struct goal *g = goal_add("watchdog < 2% of a core, 1000 runs at 4 Hz");
		double net[MAX_REPEATS];
		for (int r = 0; r < cfg.repeats; r++)
			net[r] = wd_pct[1][r] - wd_pct[0][r];
		struct stat3 q = stat3_of(net, cfg.repeats);
		snprintf(g->figure, sizeof g->figure, "%.3f%% of a core for %u runs", q.med, wd_runs_up[1]);
		g->met = q.med < GOAL_WATCHDOG_PERCENT;
	}
	if ((cfg.sections & S_SCALE) && nscale > 0) {
		struct goal *g = goal_add("10,000 runs, parent memory < 4 KiB per run");
		const struct scale_result *r = &scale_res[0];
		int len = snprintf(g->figure, sizeof g->figure, "%u runs: %.0f B heap, %.0f B RSS per run",
		                   r->runs, r->heap_per_run, r->rss_per_run);
		if (r->runs < r->want)
			snprintf(g->figure + len, sizeof g->figure - (size_t)len,
			         " (%u asked; RLIMIT_NOFILE's hard limit %llu allows no more)", r->want,
			         (unsigned long long)nofile_hard);
		else if (r->runs < 10000)
			snprintf(g->figure + len, sizeof g->figure - (size_t)len, " (--full runs 10,000)");
		g->met = r->ok && r->heap_per_run < GOAL_BYTES_PER_RUN && r->rss_per_run < GOAL_BYTES_PER_RUN;
	}
	printf("\n== goals (issue 6; reported, not asserted)\n");
	for (int i = 0; i < ngoals; i++)
		printf("   %-7s %s: %s\n",
		       goals[i].met == 1 ? "met" : goals[i].met == 0 ? "MISSED" : "-", goals[i].name,
		       goals[i].figure);
}

/* ----------------------------------------------------------- JSON, markdown */

static void json_sample(const struct sample *s)
{
	jopen(NULL, '{');
	jbool("ok", s->ok);
	jnum("runs", s->runs);
	jnum("failed", s->failed);
	jnum("seconds", s->seconds);
	jnum("runs_per_second", s->rps);
	jnum("p50_seconds", s->p50);
	jnum("p99_seconds", s->p99);
	if (s->error[0])
		jtext("error", s->error);
	jclose('}');
}

static void json_write(const char *path)
{
	J = fopen(path, "w");
	if (!J) {
		fprintf(stderr, "sbxbench: %s: %s\n", path, strerror(errno));
		return;
	}
	jdepth = 0;
	jsep[0] = false;
	jopen(NULL, '{');
	jtext("benchmark", "sbxbench");
	jtext("mode", cfg.full ? "full" : "quick");
	jnum("repeats", cfg.repeats);
	jnum("repeats_fast", cfg.repeats_fast);
	jnum("repeats_bwrap", cfg.repeats_bwrap);
	jopen("machine", '{');
	jnum("nproc", mach.ncpu);
	jtext("kernel", mach.kernel);
	jtext("cpu", mach.cpu);
	jtext("memory", mach.mem);
	jtext("date", mach.date);
	jnum("loadavg_start", mach.load_start);
	jnum("loadavg_end", mach.load_end);
	jclose('}');
	jopen("unavailable", '{');
	for (int m = 0; m < M_COUNT; m++)
		if (!avail[m])
			jtext(methods[m].key, why_not[m]);
	jclose('}');
	if (cfg.sections & S_SPAWN) {
		jopen("spawn", '[');
		for (int pi = 0; pi < nprogs; pi++)
			for (int ci = 0; ci < NCONC; ci++)
				for (int m = 0; m < M_COUNT; m++) {
					if (!avail[m] || !(cfg.methods & (1u << m)))
						continue;
					jopen(NULL, '{');
					jtext("program", progs[pi].name);
					jnum("concurrency", concurrency[ci]);
					jtext("method", methods[m].key);
					jtext("baseline", methods[m].baseline >= 0 ? methods[methods[m].baseline].key : NULL);
					jnum("count", count_for((enum method)m, ci));
					if (methods[m].baseline >= 0) {
						struct stat3 q = ratio_of(pi, ci, m);
						jnum("ratio_median", q.med);
						jnum("ratio_min", q.lo);
						jnum("ratio_max", q.hi);
					}
					jopen("repeats", '[');
					for (int r = 0; r < nrep(m, ci); r++)
						json_sample(&spawn_s[pi][ci][m][r]);
					jclose(']');
					jclose('}');
				}
		jclose(']');
	}
	if (cfg.sections & S_SCALE) {
		jopen("scale", '[');
		for (int i = 0; i < nscale; i++) {
			const struct scale_result *r = &scale_res[i];
			jopen(NULL, '{');
			jtext("backend", r->backend);
			jbool("ok", r->ok);
			jnum("runs", r->runs);
			jnum("runs_asked", r->want);
			jnum("rlimit_nofile_hard", (double)nofile_hard);
			jnum("start_seconds", r->start_seconds);
			jnum("start_cpu_seconds", r->start_cpu);
			jnum("end_seconds", r->end_seconds);
			jnum("heap_bytes_per_run", r->heap_per_run);
			jnum("rss_bytes_per_run", r->rss_per_run);
			jnum("rss_bytes_per_run_after_steady", r->rss_steady_per_run);
			jnum("fds_per_run", r->fds_per_run);
			jnum("meminfo_kernel_bytes_per_run", r->kernel_per_run);
			if (r->floor_ok) {
				jnum("floor_start_seconds", r->floor_start_seconds / r->floor_runs);
				jnum("floor_start_cpu_seconds", r->floor_start_cpu / r->floor_runs);
				jnum("floor_heap_bytes_per_run", r->floor_heap_per_run / r->floor_runs);
				jnum("floor_rss_bytes_per_run", r->floor_rss_per_run / r->floor_runs);
			}
			jopen("loop_lateness_seconds", '{');
			for (int ph = 0; ph < PH_COUNT; ph++) {
				jopen(phase_name[ph], '{');
				jnum("p50", r->p50[ph]);
				jnum("p99", r->p99[ph]);
				jnum("max", r->max[ph]);
				jnum("samples", (double)r->samples[ph]);
				jclose('}');
			}
			jclose('}');
			if (r->error[0])
				jtext("error", r->error);
			jclose('}');
		}
		jclose(']');
	}
	if (cfg.sections & S_OUTPUT) {
		jopen("output", '{');
		jnum("bytes", (double)cfg.output_bytes);
		for (int d = 0; d < D_COUNT; d++) {
			jopen(drains[d].key, '[');
			for (int r = 0; r < cfg.repeats; r++)
				jnum(NULL, drain_ok[d][r] ? drain_gibs[d][r] : NAN);
			jclose(']');
		}
		jclose('}');
	}
	if (cfg.sections & S_WATCHDOG) {
		jopen("watchdog", '{');
		jnum("runs", cfg.wd_runs);
		jnum("window_seconds", cfg.wd_seconds);
		jopen("cpu_percent_without", '[');
		for (int r = 0; r < cfg.repeats; r++)
			jnum(NULL, wd_pct[0][r]);
		jclose(']');
		jopen("cpu_percent_with", '[');
		for (int r = 0; r < cfg.repeats; r++)
			jnum(NULL, wd_pct[1][r]);
		jclose(']');
		jclose('}');
	}
	if (cfg.sections & S_MEMORY) {
		jopen("memory", '{');
		jnum("runs", cfg.mem_runs);
		jtext("kernel_source", cg_on || cg_self[0] ? "cgroup_v1 memory.kmem.usage_in_bytes"
		                                           : "meminfo Slab+KernelStack+PageTables");
		for (int k = 0; k < K_COUNT; k++) {
			if (!memres[k].ok)
				continue;
			jopen(mems[k].key, '{');
			const double *f[5] = { memres[k].kernel, memres[k].total, memres[k].heap,
			                       memres[k].rss, memres[k].fds };
			static const char *const names[5] = { "kernel_bytes_per_run", "cgroup_bytes_per_run",
			                                      "heap_bytes_per_run", "rss_bytes_per_run",
			                                      "fds_per_run" };
			for (int i = 0; i < 5; i++) {
				jopen(names[i], '[');
				for (int r = 0; r < cfg.repeats; r++)
					jnum(NULL, f[i][r]);
				jclose(']');
			}
			jclose('}');
		}
		jclose('}');
	}
	jopen("goals", '[');
	for (int i = 0; i < ngoals; i++) {
		jopen(NULL, '{');
		jtext("goal", goals[i].name);
		jtext("figure", goals[i].figure);
		jkey("met");
		fputs(goals[i].met == 1 ? "true" : goals[i].met == 0 ? "false" : "null", J);
		jclose('}');
	}
	jclose(']');
	jclose('}');
	fclose(J);
	printf("\nraw numbers: %s\n", path);
}

/* A README section: the spawn ratios as a table, the other figures in lines. */
static void markdown_write(const char *path, int argc, char **argv)
{
	FILE *f = fopen(path, "w");
	if (!f) {
		fprintf(stderr, "sbxbench: %s: %s\n", path, strerror(errno));
		return;
	}
	fprintf(f, "## Performance\n\n");
	fprintf(f, "Measured by `make bench BENCH_MODE=full` (`bench/sbxbench --full`); each figure is "
	        "the median over %d-%d repeats of its ratio to a baseline measured in the same run, "
	        "with the range in brackets. Machine: %ld cores (%s), %s, Linux %s; %s; load average "
	        "%.1f at the start, %.1f at the end (other work was running).\n\n",
	        cfg.repeats, cfg.repeats_fast, mach.ncpu, mach.cpu, mach.mem, mach.kernel, mach.date,
	        mach.load_start, mach.load_end);
	if (cfg.sections & S_SPAWN) {
		fprintf(f, "Runs per second, as a ratio to the baseline (floor: posix_spawn + pidfd + "
		        "epoll, no library; bwrap: the same loop spawning sbx's own bwrap command line):\n\n");
		fprintf(f, "| method (baseline) |");
		for (int pi = 0; pi < nprogs; pi++)
			for (int ci = 0; ci < NCONC; ci++)
				fprintf(f, " %s c=%u |", strrchr(progs[pi].name, '/') ? strrchr(progs[pi].name, '/') + 1
				                                                    : progs[pi].name,
				        concurrency[ci]);
		fprintf(f, "\n|---|");
		for (int i = 0; i < nprogs * NCONC; i++)
			fprintf(f, "---|");
		fprintf(f, "\n");
		for (int m = 0; m < M_COUNT; m++) {
			if (!avail[m] || !(cfg.methods & (1u << m)))
				continue;
			int b = methods[m].baseline;
			fprintf(f, "| %s (%s) |", methods[m].label, b >= 0 ? methods[b].key : "runs/s");
			for (int pi = 0; pi < nprogs; pi++)
				for (int ci = 0; ci < NCONC; ci++) {
					if (b < 0) {
						fprintf(f, " %.0f/s |", field_of(pi, ci, m, 0).med);
					} else {
						struct stat3 q = ratio_of(pi, ci, m);
						fprintf(f, " %.2f [%.2f-%.2f] |", q.med, q.lo, q.hi);
					}
				}
			fprintf(f, "\n");
		}
		fprintf(f, "\nsbx native and landlock: not available yet. Programs: `%s`%s.\n\n",
		        progs[0].name, nprogs > 1 ? " and `bench/tiny` (static, no libc)" : "");
	}
	for (int i = 0; i < ngoals; i++)
		fprintf(f, "- %s **%s**: %s\n", goals[i].met == 1 ? "met" : goals[i].met == 0 ? "missed" : "-",
		        goals[i].name, goals[i].figure);
	if (nscale > 0) {
		const struct scale_result *r = &scale_res[0];
		fprintf(f, "- %u sleeping runs on one loop: %.2f fds per run; timer-probe lateness p99 "
		        "%.1f ms while starting, %.2f ms steady, %.1f ms while ending (idle %.2f ms).\n",
		        r->runs, r->fds_per_run, 1e3 * r->p99[PH_START], 1e3 * r->p99[PH_STEADY],
		        1e3 * r->p99[PH_END], 1e3 * r->p99[PH_IDLE]);
	}
	if ((cfg.sections & S_MEMORY) && memres[K_SBX_BWRAP].ok) {
		fprintf(f, "- Kernel memory per idle run (%s): floor %.0f KiB, passthrough %.0f KiB, "
		        "bwrap %.0f KiB.\n",
		        cg_self[0] ? "memory cgroup kmem" : "meminfo",
		        stat3_of(memres[K_FLOOR].kernel, cfg.repeats).med / 1024,
		        stat3_of(memres[K_PASSTHROUGH].kernel, cfg.repeats).med / 1024,
		        stat3_of(memres[K_SBX_BWRAP].kernel, cfg.repeats).med / 1024);
	}
	fprintf(f, "\nReproduce:");
	for (int i = 0; i < argc; i++)
		fprintf(f, " %s", argv[i]);
	fprintf(f, "\n");
	fclose(f);
	printf("markdown: %s\n", path);
}

/* ----------------------------------------------------------------- main */

static void usage(void)
{
	fprintf(stderr,
	        "usage: sbxbench [--full | --mode quick|full] [--repeats N] [--only spawn,scale,output,watchdog,memory]\n"
	        "                [--program PATH] [--tiny PATH] [--scripts DIR] [--python PATH]\n"
	        "                [--node PATH] [--json FILE] [--markdown FILE] [--scale-runs N]\n"
	        "                [--methods floor,sbx_passthrough,bwrap_bare,sbx_bwrap,python_asyncio,"
	        "node_spawn]\n");
	exit(2);
}

static void config_init(bool full)
{
	cfg.full = full;
	cfg.repeats = full ? 5 : 3;
	cfg.repeats_fast = full ? 15 : 9;
	cfg.repeats_bwrap = full ? 9 : 5; /* bwrap at concurrency 1 and 16; at 256, |repeats| */
	const unsigned qf[NCONC] = { 60, 150, 512 }, qb[NCONC] = { 20, 48, 256 };
	const unsigned ff[NCONC] = { 300, 600, 1536 }, fb[NCONC] = { 100, 256, 1024 };
	memcpy(cfg.n_fast, full ? ff : qf, sizeof cfg.n_fast);
	memcpy(cfg.n_bwrap, full ? fb : qb, sizeof cfg.n_bwrap);
	/* Each start costs time in proportion to the fds open (the kernel copies the
	 * table at clone and closes it at exec), so a burst of N costs N squared. */
	cfg.scale_runs = full ? 10000 : 2000;
	cfg.scale_bwrap_runs = full ? 1000 : 0;
	cfg.idle_seconds = full ? 2 : 0.5;
	cfg.steady_seconds = full ? 3 : 1;
	cfg.wd_runs = 1000;
	cfg.wd_seconds = full ? 10 : 1.5;
	cfg.mem_runs = full ? 512 : 128;
	cfg.output_bytes = 1ULL << 30;
}

int main(int argc, char **argv)
{
	bool full = false;
	for (int i = 1; i < argc; i++)
		if (strcmp(argv[i], "--full") == 0 ||
		    (strcmp(argv[i], "--mode") == 0 && i + 1 < argc && strcmp(argv[i + 1], "full") == 0))
			full = true;
	config_init(full);
	cfg.sections = S_SPAWN | S_SCALE | S_OUTPUT | S_WATCHDOG | S_MEMORY;
	cfg.methods = (1u << M_COUNT) - 1;
	cfg.program = "/bin/true";
	cfg.tiny = SBX_BENCH_BUILDDIR "/tiny";
	cfg.scripts = SBX_BENCH_SRCDIR;
	cfg.python = "/usr/bin/python3";
	cfg.node = "/usr/bin/node";
	cfg.json = full ? "bench/results-full.json" : "bench/results-quick.json";
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (strcmp(a, "--full") == 0 || strcmp(a, "--quick") == 0)
			continue;
		if (!v)
			usage();
		i++;
		if (strcmp(a, "--mode") == 0) {
			if (strcmp(v, "quick") != 0 && strcmp(v, "full") != 0)
				usage();
		} else if (strcmp(a, "--repeats") == 0)
			cfg.repeats = cfg.repeats_fast = cfg.repeats_bwrap = atoi(v);
		else if (strcmp(a, "--program") == 0)
			cfg.program = v;
		else if (strcmp(a, "--tiny") == 0)
			cfg.tiny = v;
		else if (strcmp(a, "--scripts") == 0)
			cfg.scripts = v;
		else if (strcmp(a, "--python") == 0)
			cfg.python = v;
		else if (strcmp(a, "--node") == 0)
			cfg.node = v;
		else if (strcmp(a, "--json") == 0)
			cfg.json = v;
		else if (strcmp(a, "--markdown") == 0)
			cfg.markdown = v;
		else if (strcmp(a, "--methods") == 0) {
			cfg.methods = 0;
			char *list = strdup(v), *save = NULL;
			for (char *t = strtok_r(list, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
				unsigned bit = 0;
				for (int m = 0; m < M_COUNT; m++)
					if (strcmp(t, methods[m].key) == 0)
						bit = 1u << m;
				if (!bit)
					usage();
				cfg.methods |= bit;
			}
			free(list);
		} else if (strcmp(a, "--scale-runs") == 0)
			cfg.scale_runs = (unsigned)atoi(v);
		else if (strcmp(a, "--only") == 0) {
			cfg.sections = 0;
			static const char *const names[] = { "spawn", "scale", "output", "watchdog", "memory" };
			char *list = strdup(v), *save = NULL;
			for (char *t = strtok_r(list, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
				unsigned bit = 0;
				for (unsigned k = 0; k < 5; k++)
					if (strcmp(t, names[k]) == 0)
						bit = 1u << k;
				if (!bit)
					usage();
				cfg.sections |= bit;
			}
			free(list);
		} else
			usage();
	}
	if (cfg.repeats < 1 || cfg.repeats > MAX_REPEATS || cfg.scale_runs < 1)
		usage();

	/* Nothing here may be inherited by a child: bwrap passes fds on. */
	devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (devnull < 0)
		die("/dev/null: %s", strerror(errno));
	signal(SIGPIPE, SIG_IGN);
	setvbuf(stdout, NULL, _IOLBF, 0);
	machine_read();
	base = event_base_new();
	if (!base)
		die("event_base_new failed");

	bool tiny = access(cfg.tiny, X_OK) == 0;
	if (!tiny) {
		printf("bench/tiny (%s) is missing: the sections that need it are skipped\n", cfg.tiny);
		cfg.sections &= ~(unsigned)(S_SCALE | S_OUTPUT | S_WATCHDOG | S_MEMORY);
	}
	sleeper_argv[0] = cfg.tiny;
	sleeper_argv[1] = "sleep";
	sandboxes_open();
	progs[nprogs].name = cfg.program;
	progs[nprogs++].argv[0] = cfg.program;
	if (tiny) {
		progs[nprogs].name = cfg.tiny;
		progs[nprogs++].argv[0] = cfg.tiny;
	}
	for (int pi = 0; pi < nprogs; pi++)
		progs[pi].wrapped = wrap_bwrap(progs[pi].argv);

	printf("sbxbench %s mode: %ld cores, %s, Linux %s, %s; %s; load average %.2f\n",
	       cfg.full ? "full" : "quick", mach.ncpu, mach.cpu, mach.kernel, mach.mem, mach.date,
	       mach.load_start);
	double t0 = now();
	if (cfg.sections & S_SPAWN)
		spawn_section();
	if (cfg.sections & S_SCALE)
		scale_section();
	if (cfg.sections & S_OUTPUT)
		output_section();
	if (cfg.sections & S_WATCHDOG)
		watchdog_section();
	if (cfg.sections & S_MEMORY)
		memory_section();
	mach.load_end = loadavg1();
	goals_eval();
	printf("\nsbxbench took %.0f s; load average %.2f at the start, %.2f at the end\n",
	       now() - t0, mach.load_start, mach.load_end);
	if (cfg.json)
		json_write(cfg.json);
	if (cfg.markdown)
		markdown_write(cfg.markdown, argc, argv);

	for (int pi = 0; pi < nprogs; pi++)
		sbx_wrapped_free(progs[pi].wrapped);
	for (int m = 0; m < M_COUNT; m++)
		sbx_sandbox_free(sandbox[m]);
	if (probe.ev)
		event_free(probe.ev);
	event_base_free(base);
	free(lat);
	return 0;
}
