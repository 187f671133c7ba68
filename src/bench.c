/*
 * bench.c -- `sbx bench`: how many runs a second this machine gives, and at
 * what latency, next to the floor measured in the same invocation.
 *
 *   sbx bench [--backend NAME] [--runs N] [--concurrency N] [--json] [-- PROGRAM [ARG...]]
 *
 * The floor is the same program spawned by posix_spawn and watched through
 * a pidfd, with no library and no sandbox: what any runner pays.  The full
 * comparison with bubblewrap, Python and Node is bench/sbxbench in the
 * source tree (`make bench`).
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <math.h>
#include <poll.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "cli.h"

extern char **environ;

struct bench {
	sbx_sandbox *sb;
	sbx_run_options o;
	unsigned runs, concurrency;
	unsigned started, done, failed;
	double *latency;        /* seconds, per run */
	double *t_start;        /* per slot: when its run started */
};

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int by_value(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* The q-quantile of |n| sorted values. */
static double quantile(const double *v, unsigned n, double q)
{
	if (n == 0)
		return 0;
	unsigned i = (unsigned)ceil(q * n);
	return v[i ? i - 1 : 0];
}

/* One slot's run; the slot index rides in the callback argument. */
struct slot {
	struct bench *b;
	double t0;
};

static void start_next(struct slot *s);

static void on_done(sbx_result *r, void *arg)
{
	struct slot *s = arg;
	struct bench *b = s->b;
	if (!r->exited || r->exit_code != 0)
		b->failed++;
	b->latency[b->done++] = now() - s->t0;
	sbx_result_free(r);
	start_next(s);
}

static void start_next(struct slot *s)
{
	struct bench *b = s->b;
	if (b->started == b->runs)
		return;
	b->started++;
	s->t0 = now();
	sbx_error err;
	if (sbx_run_start(b->sb, &b->o, on_done, s, NULL, &err) < 0) {
		cli_error("%s", err.message);
		b->failed++;
		b->latency[b->done++] = 0;
	}
}

/*
 * The floor: |concurrency| children at a time, posix_spawn'ed and watched
 * through pidfds.  Only our own children, each waited for by its pid.
 */
static int floor_runs(char *const *argv, unsigned runs, unsigned concurrency, double *latency)
{
	struct pollfd *p = calloc(concurrency, sizeof *p);
	pid_t *pid = calloc(concurrency, sizeof *pid);
	double *t0 = calloc(concurrency, sizeof *t0);
	unsigned started = 0, done = 0, busy = 0;
	/* Output goes where sbx's goes: nowhere it would be seen. */
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	for (int fd = 0; fd < 3; fd++)
		posix_spawn_file_actions_addopen(&fa, fd, "/dev/null", fd ? O_WRONLY : O_RDONLY, 0);
	int rc = 0;
	if (!p || !pid || !t0)
		rc = -ENOMEM;
	for (unsigned i = 0; i < concurrency; i++)
		p[i].fd = -1;
	while (rc == 0 && done < runs) {
		for (unsigned i = 0; i < concurrency && started < runs; i++) {
			if (p[i].fd >= 0)
				continue;
			t0[i] = now();
			if ((rc = posix_spawn(&pid[i], argv[0], &fa, NULL, argv, environ)) != 0) {
				rc = -rc;
				break;
			}
			p[i].fd = (int)syscall(SYS_pidfd_open, pid[i], 0);
			p[i].events = POLLIN;
			if (p[i].fd < 0) {
				/* No pidfds here: wait for this one at once. */
				while (waitpid(pid[i], NULL, 0) < 0 && errno == EINTR)
					;
				latency[done++] = now() - t0[i];
			} else {
				busy++;
			}
			started++;
		}
		if (rc < 0 || busy == 0)
			continue;
		if (poll(p, concurrency, -1) < 0 && errno != EINTR)
			rc = -errno;
		for (unsigned i = 0; rc == 0 && i < concurrency; i++) {
			if (p[i].fd < 0 || !(p[i].revents & POLLIN))
				continue;
			while (waitpid(pid[i], NULL, 0) < 0 && errno == EINTR)
				;
			close(p[i].fd);
			p[i].fd = -1;
			p[i].revents = 0;
			busy--;
			latency[done++] = now() - t0[i];
		}
	}
	for (unsigned i = 0; p && pid && i < concurrency; i++) {
		if (p[i].fd >= 0) {
			while (waitpid(pid[i], NULL, 0) < 0 && errno == EINTR)
				;
			close(p[i].fd);
		}
	}
	posix_spawn_file_actions_destroy(&fa);
	free(p);
	free(pid);
	free(t0);
	return rc;
}

static void usage(FILE *f)
{
	fputs("usage: sbx bench [--backend NAME] [--runs N] [--concurrency N] [--json] [-- PROGRAM [ARG...]]\n"
	      "\nRuns PROGRAM (default /bin/true) N times (1000), N at once (16), in a sandbox\n"
	      "of the chosen backend (auto), and once more spawned bare by posix_spawn, the\n"
	      "floor; prints runs per second and latency for both and their ratio.\n"
	      "The full comparison is bench/sbxbench in the source tree (make bench).\n",
	      f);
}

static int parse_unsigned(const char *opt, const char *text, unsigned max, unsigned *out)
{
	char *end;
	errno = 0;
	unsigned long v = strtoul(text, &end, 10);
	if (!text[0] || *end || errno || v == 0 || v > max || text[0] == '-') {
		cli_error("%s must be a whole number from 1 to %u: '%s'", opt, max, text);
		return -1;
	}
	*out = (unsigned)v;
	return 0;
}

struct figures {
	double rate, p50, p99;
};

static struct figures figures_of(double *latency, unsigned n, double wall)
{
	qsort(latency, n, sizeof *latency, by_value);
	return (struct figures){ n / wall, quantile(latency, n, 0.5), quantile(latency, n, 0.99) };
}

int cli_cmd_bench(int argc, char **argv)
{
	static const struct option longopts[] = {
		{"backend", required_argument, NULL, 'b'},
		{"runs", required_argument, NULL, 'n'},
		{"concurrency", required_argument, NULL, 'c'},
		{"json", no_argument, NULL, 'j'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	sbx_sandbox_options so;
	sbx_sandbox_options_init(&so);
	struct bench b = { .runs = 1000, .concurrency = 16 };
	bool json = false;
	int opt;
	opterr = 0;
	optind = 1;
	while ((opt = getopt_long(argc, argv, "+h", longopts, NULL)) != -1) {
		switch (opt) {
		case 'b':
			if (cli_parse_backend(optarg, &so.backend) < 0)
				return CLI_EXIT_FAILURE;
			break;
		case 'n':
			if (parse_unsigned("--runs", optarg, 10000000, &b.runs) < 0)
				return CLI_EXIT_FAILURE;
			break;
		case 'c':
			if (parse_unsigned("--concurrency", optarg, 100000, &b.concurrency) < 0)
				return CLI_EXIT_FAILURE;
			break;
		case 'j':
			json = true;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			cli_error("unknown option or missing value '%s'; try 'sbx bench --help'",
			          argv[optind - 1]);
			return CLI_EXIT_FAILURE;
		}
	}
	static char *default_argv[] = {"/bin/true", NULL};
	char **prog = optind < argc ? &argv[optind] : default_argv;
	if (prog[0][0] != '/') {
		cli_error("the program must be an absolute path (the floor spawns it without a PATH "
		          "search): '%s'", prog[0]);
		return CLI_EXIT_FAILURE;
	}
	if (b.concurrency > b.runs)
		b.concurrency = b.runs;

	int status = CLI_EXIT_FAILURE;
	struct event_base *base = event_base_new();
	struct slot *slots = calloc(b.concurrency, sizeof *slots);
	double *floor_latency = calloc(b.runs, sizeof *floor_latency);
	b.latency = calloc(b.runs, sizeof *b.latency);
	sbx_error err;
	if (!base || !slots || !floor_latency || !b.latency) {
		cli_error("out of memory");
		goto out;
	}
	if (sbx_sandbox_new(base, NULL, &so, &b.sb, &err) < 0) {
		cli_error("%s", err.message);
		goto out;
	}
	sbx_run_options_init(&b.o);
	b.o.argv = (const char *const *)prog;

	/* The floor first, then sbx, so the machine is equally warm for both
	 * (the floor has the program in the page cache already). */
	double t0 = now();
	int rc = floor_runs(prog, b.runs, b.concurrency, floor_latency);
	double floor_wall = now() - t0;
	if (rc < 0) {
		cli_error("cannot spawn %s: %s", prog[0], strerror(-rc));
		goto out;
	}
	t0 = now();
	for (unsigned i = 0; i < b.concurrency; i++) {
		slots[i].b = &b;
		start_next(&slots[i]);
	}
	event_base_dispatch(base);
	double sbx_wall = now() - t0;

	struct figures f = figures_of(floor_latency, b.runs, floor_wall);
	struct figures s = figures_of(b.latency, b.done, sbx_wall);
	const char *backend = sbx_sandbox_backend(b.sb);
	if (json) {
		json_t *out = json_pack("{s:o, s:I, s:I, s:I, s:{s:f, s:f, s:f}, s:{s:f, s:f, s:f}, s:f}",
		                        "program", cli_json_text(prog[0], strlen(prog[0])),
		                        "runs", (json_int_t)b.runs, "concurrency", (json_int_t)b.concurrency,
		                        "failed", (json_int_t)b.failed,
		                        "floor", "runs_per_second", f.rate, "p50_ms", f.p50 * 1e3,
		                        "p99_ms", f.p99 * 1e3,
		                        backend, "runs_per_second", s.rate, "p50_ms", s.p50 * 1e3,
		                        "p99_ms", s.p99 * 1e3,
		                        "ratio", s.rate / f.rate);
		if (!out || json_dumpf(out, stdout, JSON_INDENT(2) | JSON_REAL_PRECISION(6)) < 0) {
			cli_error("cannot write the JSON output");
			json_decref(out);
			goto out;
		}
		json_decref(out);
		putchar('\n');
	} else {
		printf("%u runs of %s, %u at a time\n", b.runs, prog[0], b.concurrency);
		printf("  %-12s %9.1f runs/s   p50 %7.2f ms   p99 %7.2f ms\n", "floor", f.rate,
		       f.p50 * 1e3, f.p99 * 1e3);
		printf("  %-12s %9.1f runs/s   p50 %7.2f ms   p99 %7.2f ms   %.2fx the floor\n", backend,
		       s.rate, s.p50 * 1e3, s.p99 * 1e3, s.rate / f.rate);
		if (b.failed)
			printf("  %u runs did not exit with status 0\n", b.failed);
	}
	status = b.failed ? CLI_EXIT_FAILURE : 0;
out:
	sbx_sandbox_free(b.sb);
	if (base)
		event_base_free(base);
	free(slots);
	free(floor_latency);
	free(b.latency);
	return status;
}
