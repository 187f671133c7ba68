/*
 * bench/watchdog.c -- what the memory watchdog costs: N sleeping children
 * watched by one watchdog at 4 Hz, against the same loop with nothing to
 * watch, measured in this process's CPU time (getrusage, user + system).
 *
 *   bench/watchdog [-n N] [-t SECONDS] [-i INTERVAL] [-r REPEATS] [--compare]
 *                  [--busy HZ] [--json FILE]
 *
 * Each repeat runs the bare loop (a timer at the same interval that does
 * nothing) for SECONDS, then the loop with all N children watched for
 * SECONDS; the watchdog's cost is the difference.  --compare adds the
 * schedules of /proc scans the watchdog does not use by default (watchdog.h:
 * "plain", the fallback without /proc/loadavg, and a full scan every tick),
 * each measured the same way, to show what the default saves.  The goal
 * (issue 6) is under 2% of one core for 1000 runs at 4 Hz.
 *
 * A quiet machine lets the default schedule skip nearly every scan; --busy
 * HZ starts a neighbour that runs /bin/true HZ times a second (not watched,
 * and not counted: its CPU is its own), so that new pids appear all the time
 * as they do on a machine running many sandboxes.
 *
 * The children are /bin/sleep, each the leader of its own session as a
 * run's child is; they die with this process (PR_SET_PDEATHSIG) and are
 * killed and reaped by pid at the end.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "watchdog.h"

#define GOAL_PERCENT 2.0
#define MAX_REPEATS 16

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

static void usage(const char *argv0)
{
	fprintf(stderr,
	        "usage: %s [-n N] [-t SECONDS] [-i INTERVAL] [-r REPEATS] [--compare] [--busy HZ]\n"
	        "          [--json FILE]\n",
	        argv0);
	exit(2);
}

/* ---------------------------------------------------------------- children */

static pid_t spawn_sleeper(void)
{
	pid_t pid = fork();
	if (pid == 0) {
		setsid();
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		execl("/bin/sleep", "sleep", "600", (char *)NULL);
		_exit(127);
	}
	return pid;
}

/* Whether |pid| runs sleep yet (its comm changes at exec). */
static bool is_sleep(pid_t pid)
{
	char path[64], comm[32] = "";
	snprintf(path, sizeof path, "/proc/%d/comm", (int)pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return false;
	bool ok = fgets(comm, sizeof comm, f) && strcmp(comm, "sleep\n") == 0;
	fclose(f);
	return ok;
}

/* A process that runs /bin/true |hz| times a second until killed. */
static pid_t spawn_neighbour(double hz)
{
	pid_t pid = fork();
	if (pid != 0)
		return pid;
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	struct timespec gap = { (time_t)(1 / hz), (long)((1 / hz - (double)(time_t)(1 / hz)) * 1e9) };
	for (;;) {
		pid_t child = fork();
		if (child == 0) {
			execl("/bin/true", "true", (char *)NULL);
			_exit(127);
		}
		if (child > 0)
			waitpid(child, NULL, 0);
		nanosleep(&gap, NULL);
	}
}

static void reap_all(pid_t *pids, int n)
{
	for (int i = 0; i < n; i++)
		if (pids[i] > 0)
			kill(pids[i], SIGKILL);
	for (int i = 0; i < n; i++)
		if (pids[i] > 0)
			while (waitpid(pids[i], NULL, 0) < 0 && errno == EINTR)
				;
}

/* -------------------------------------------------------------------- loop */

static void on_nothing(evutil_socket_t fd, short what, void *arg)
{
}

static void on_end(evutil_socket_t fd, short what, void *arg)
{
	event_base_loopbreak(arg);
}

/* Runs |base| for |seconds|; the CPU seconds this process used meanwhile. */
static double run_for(struct event_base *base, double seconds, double *wall)
{
	struct event *end = event_new(base, -1, 0, on_end, base);
	struct timeval tv = { (time_t)seconds, (suseconds_t)((seconds - (double)(time_t)seconds) * 1e6) };
	event_add(end, &tv);
	double c0 = cpu_seconds(), t0 = now();
	event_base_dispatch(base);
	double c1 = cpu_seconds();
	*wall = now() - t0;
	event_free(end);
	return c1 - c0;
}

/* The bare loop: a timer at the same interval, so it wakes as often. */
static double baseline(double interval, double seconds, double *wall)
{
	struct event_base *base = event_base_new();
	struct event *tick = event_new(base, -1, EV_PERSIST, on_nothing, NULL);
	struct timeval tv = { (time_t)interval, (suseconds_t)((interval - (double)(time_t)interval) * 1e6) };
	event_add(tick, &tv);
	double cpu = run_for(base, seconds, wall);
	event_free(tick);
	event_base_free(base);
	return cpu;
}

/*
 * The two costs the schedule trades: a pread() of a kept-open statm (every
 * member, every tick) and an open-read-close of a stat (every process a
 * scan reads).  Timed over the children, in microseconds each.
 */
static void unit_costs(const pid_t *pids, int n, double *statm_us, double *stat_us)
{
	char path[64], buf[512];
	int *fds = malloc((size_t)n * sizeof *fds);
	if (!fds)
		return;
	for (int i = 0; i < n; i++) {
		snprintf(path, sizeof path, "/proc/%d/statm", (int)pids[i]);
		fds[i] = open(path, O_RDONLY | O_CLOEXEC);
	}
	double t0 = now();
	for (int round = 0; round < 4; round++)
		for (int i = 0; i < n; i++)
			if (pread(fds[i], buf, 64, 0) < 0)
				break;
	*statm_us = 1e6 * (now() - t0) / (4.0 * n);
	for (int i = 0; i < n; i++)
		close(fds[i]);
	free(fds);
	t0 = now();
	for (int round = 0; round < 4; round++) {
		for (int i = 0; i < n; i++) {
			snprintf(path, sizeof path, "/proc/%d/stat", (int)pids[i]);
			int fd = open(path, O_RDONLY | O_CLOEXEC);
			if (fd >= 0) {
				if (read(fd, buf, sizeof buf) < 0)
					buf[0] = '\0';
				close(fd);
			}
		}
	}
	*stat_us = 1e6 * (now() - t0) / (4.0 * n);
}

static void on_over(void *arg)
{
	int *trips = arg;
	(*trips)++;
}

struct phase {
	double cpu, wall, add_seconds;
	struct sbx__wd_stats st;
	int trips;
};

/* All |n| children watched by one watchdog for |seconds|. */
static int watched(const pid_t *pids, int n, double interval, double seconds,
                   enum sbx__wd_schedule schedule, struct phase *ph)
{
	struct event_base *base = event_base_new();
	struct sbx__watchdog *wd = sbx__watchdog_new(base, interval);
	struct sbx__wd_entry **e = calloc((size_t)n, sizeof *e);
	if (!base || !wd || !e) {
		fprintf(stderr, "out of memory\n");
		return -1;
	}
	memset(ph, 0, sizeof *ph);
	sbx__watchdog_set_schedule(wd, schedule);
	double t0 = now();
	for (int i = 0; i < n; i++) {
		e[i] = sbx__watchdog_add(wd, pids[i], 1ULL << 40, on_over, &ph->trips);
		if (!e[i]) {
			fprintf(stderr, "watching child %d (pid %d): %s\n", i, (int)pids[i], strerror(errno));
			return -1;
		}
	}
	ph->add_seconds = now() - t0;
	ph->cpu = run_for(base, seconds, &ph->wall);
	sbx__watchdog_stats(wd, &ph->st);
	for (int i = 0; i < n; i++)
		sbx__watchdog_remove(wd, e[i]);
	sbx__watchdog_free(wd);
	event_base_free(base);
	free(e);
	return 0;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof *v, cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* -------------------------------------------------------------------- main */

static const char *const schedule_name[] = { "gated", "plain", "every_tick" };
#define NSCHEDULES 3

/* What one schedule cost over the repeats. */
struct result {
	double pct[MAX_REPEATS];      /* CPU percent of one core over the bare loop */
	double us[MAX_REPEATS];       /* per run per sample */
	double median_pct, lo, hi, median_us;
	struct phase last;
};

static void summarize(struct result *r, int repeats)
{
	r->lo = r->hi = r->pct[0];
	for (int i = 1; i < repeats; i++) {
		r->lo = r->pct[i] < r->lo ? r->pct[i] : r->lo;
		r->hi = r->pct[i] > r->hi ? r->pct[i] : r->hi;
	}
	r->median_pct = median(r->pct, repeats);
	r->median_us = median(r->us, repeats);
}

int main(int argc, char **argv)
{
	int n = 1000, repeats = 1;
	double seconds = 10, interval = 0.25;
	bool compare = false;
	double busy = 0;
	const char *json = NULL;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (strcmp(a, "-n") == 0 && i + 1 < argc)
			n = atoi(argv[++i]);
		else if (strcmp(a, "-t") == 0 && i + 1 < argc)
			seconds = atof(argv[++i]);
		else if (strcmp(a, "-i") == 0 && i + 1 < argc)
			interval = atof(argv[++i]);
		else if (strcmp(a, "-r") == 0 && i + 1 < argc)
			repeats = atoi(argv[++i]);
		else if (strcmp(a, "--json") == 0 && i + 1 < argc)
			json = argv[++i];
		else if (strcmp(a, "--busy") == 0 && i + 1 < argc)
			busy = atof(argv[++i]);
		else if (strcmp(a, "--compare") == 0)
			compare = true;
		else
			usage(argv[0]);
	}
	if (n < 1 || !(seconds > 0) || !(interval > 0) || repeats < 1 || repeats > MAX_REPEATS ||
	    busy < 0 || busy > 10000)
		usage(argv[0]);

	/* One statm fd per child, and some to spare. */
	struct rlimit rl;
	getrlimit(RLIMIT_NOFILE, &rl);
	rl.rlim_cur = rl.rlim_max;
	setrlimit(RLIMIT_NOFILE, &rl);
	if (rl.rlim_cur < (rlim_t)n + 64) {
		fprintf(stderr, "RLIMIT_NOFILE is %llu: too low for %d children\n",
		        (unsigned long long)rl.rlim_cur, n);
		return 1;
	}

	pid_t *pids = calloc((size_t)n, sizeof *pids);
	if (!pids)
		return 1;
	double t0 = now();
	for (int i = 0; i < n; i++) {
		if ((pids[i] = spawn_sleeper()) < 0) {
			fprintf(stderr, "fork: %s\n", strerror(errno));
			reap_all(pids, i);
			return 1;
		}
	}
	for (int i = 0; i < n; i++)
		while (!is_sleep(pids[i]) && now() - t0 < 60)
			usleep(1000);
	fprintf(stderr, "started %d sleeping children in %.2f s\n", n, now() - t0);
	double statm_us = 0, stat_us = 0;
	unit_costs(pids, n, &statm_us, &stat_us);
	fprintf(stderr, "one statm pread: %.2f us; one stat open+read+close: %.2f us\n", statm_us,
	        stat_us);

	pid_t neighbour = 0;
	if (busy > 0 && (neighbour = spawn_neighbour(busy)) < 0) {
		fprintf(stderr, "fork: %s\n", strerror(errno));
		reap_all(pids, n);
		return 1;
	}
	int nschedules = compare ? NSCHEDULES : 1;
	double base_pct[MAX_REPEATS];
	static struct result res[NSCHEDULES];
	int rc = 0;
	for (int r = 0; r < repeats && rc == 0; r++) {
		double bwall, bcpu = baseline(interval, seconds, &bwall);
		base_pct[r] = 100 * bcpu / bwall;
		fprintf(stderr, "repeat %d: bare loop %.3f%% of one core\n", r + 1, base_pct[r]);
		for (int k = 0; k < nschedules && rc == 0; k++) {
			struct phase *ph = &res[k].last;
			rc = watched(pids, n, interval, seconds, (enum sbx__wd_schedule)k, ph);
			if (rc < 0)
				break;
			/* The bare loop's CPU, scaled to this phase's wall time. */
			double net = ph->cpu - bcpu * ph->wall / bwall;
			res[k].pct[r] = 100 * net / ph->wall;
			res[k].us[r] = ph->st.ticks ? 1e6 * net / ((double)ph->st.ticks * n) : 0;
			fprintf(stderr,
			        "repeat %d, %s: %.3f%% over the bare loop; %llu ticks, %llu samples, "
			        "scans %llu full / %llu new / %llu skipped, %llu stat reads, "
			        "%llu pids probed; adding %d took %.1f ms%s\n",
			        r + 1, schedule_name[k], res[k].pct[r], (unsigned long long)ph->st.ticks,
			        (unsigned long long)ph->st.samples, (unsigned long long)ph->st.scans_full,
			        (unsigned long long)ph->st.scans_new,
			        (unsigned long long)ph->st.scans_skipped,
			        (unsigned long long)ph->st.stat_reads, (unsigned long long)ph->st.probes, n,
			        1e3 * ph->add_seconds,
			        ph->trips ? "; A LIMIT TRIPPED" : "");
		}
	}
	if (neighbour > 0)
		reap_all(&neighbour, 1);
	reap_all(pids, n);
	free(pids);
	if (rc < 0)
		return 1;

	for (int k = 0; k < nschedules; k++)
		summarize(&res[k], repeats);
	const struct result *g = &res[0];
	if (busy > 0)
		printf("watchdog: with a neighbour starting %g processes a second\n", busy);
	printf("watchdog: %d runs at %.3g Hz for %.3g s: %.3f%% of one core over the bare loop "
	       "(range %.3f..%.3f%%, %d repeat%s), %.2f us per run per sample, %llu /proc scans "
	       "(%llu full) in %llu ticks of the last repeat; goal < %.0f%%: ratio %.2f, %s\n",
	       n, 1 / interval, seconds, g->median_pct, g->lo, g->hi, repeats,
	       repeats == 1 ? "" : "s", g->median_us,
	       (unsigned long long)(g->last.st.scans_full + g->last.st.scans_new),
	       (unsigned long long)g->last.st.scans_full, (unsigned long long)g->last.st.ticks,
	       GOAL_PERCENT, g->median_pct / GOAL_PERCENT,
	       g->median_pct < GOAL_PERCENT ? "met" : "missed");
	for (int k = 1; k < nschedules; k++)
		printf("watchdog: schedule %s instead: %.3f%% (%.1fx); last repeat: %llu scans, "
		       "%llu stat reads\n",
		       schedule_name[k], res[k].median_pct,
		       g->median_pct > 0 ? res[k].median_pct / g->median_pct : 0,
		       (unsigned long long)(res[k].last.st.scans_full + res[k].last.st.scans_new),
		       (unsigned long long)res[k].last.st.stat_reads);
	printf("watchdog: unit costs: statm pread %.2f us, stat open+read+close %.2f us\n", statm_us,
	       stat_us);

	if (json) {
		FILE *f = fopen(json, "w");
		if (!f) {
			fprintf(stderr, "%s: %s\n", json, strerror(errno));
			return 1;
		}
		fprintf(f, "{\"benchmark\": \"watchdog\", \"runs\": %d, \"interval\": %g, "
		        "\"seconds\": %g, \"repeats\": %d, \"busy_hz\": %g, "
		        "\"baseline_cpu_percent\": %.4f,\n"
		        " \"goal_percent\": %g, \"ratio_to_goal\": %.3f,\n"
		        " \"statm_pread_us\": %.3f, \"stat_read_us\": %.3f,\n \"schedules\": {",
		        n, interval, seconds, repeats, busy, median(base_pct, repeats), GOAL_PERCENT,
		        g->median_pct / GOAL_PERCENT, statm_us, stat_us);
		for (int k = 0; k < nschedules; k++) {
			const struct result *x = &res[k];
			const struct sbx__wd_stats *st = &x->last.st;
			fprintf(f, "%s\n  \"%s\": {\"cpu_percent\": %.4f, \"cpu_percent_min\": %.4f, "
			        "\"cpu_percent_max\": %.4f, \"us_per_run_sample\": %.3f, \"ticks\": %llu, "
			        "\"samples\": %llu, \"scans_full\": %llu, \"scans_new\": %llu, "
			        "\"scans_skipped\": %llu, \"stat_reads\": %llu, \"probes\": %llu, "
			        "\"add_seconds\": %.4f}",
			        k ? "," : "", schedule_name[k], x->median_pct, x->lo, x->hi, x->median_us,
			        (unsigned long long)st->ticks, (unsigned long long)st->samples,
			        (unsigned long long)st->scans_full, (unsigned long long)st->scans_new,
			        (unsigned long long)st->scans_skipped, (unsigned long long)st->stat_reads,
			        (unsigned long long)st->probes, x->last.add_seconds);
		}
		fprintf(f, "}}\n");
		fclose(f);
	}
	return 0;
}
