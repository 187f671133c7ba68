/*
 * parallel.c -- many sandboxed commands at once on one libevent loop.
 *
 *   examples/parallel [COUNT] [SHELL COMMAND] [BACKEND]
 *
 * Starts COUNT runs (default 1000) of the command (default: print the run's
 * number), waits for all of them on one loop, and prints how many ended
 * which way and how long it took.  This is the library's main job: an
 * agent framework or a judge with many commands in flight, on one thread.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include <event2/event.h>
#include <sbx.h>

struct tally {
	unsigned done, ok, failed, timed_out;
	size_t bytes;
};

static void on_done(sbx_result *r, void *arg)
{
	struct tally *t = arg;
	t->done++;
	if (r->timed_out)
		t->timed_out++;
	else if (r->exited && r->exit_code == 0)
		t->ok++;
	else
		t->failed++;
	t->bytes += r->out[SBX_STDOUT].len;
	sbx_result_free(r);
}

int main(int argc, char **argv)
{
	unsigned count = argc > 1 ? (unsigned)strtoul(argv[1], NULL, 10) : 1000;
	const char *command = argc > 2 ? argv[2] : "echo run $RUN";
	sbx_sandbox_options so;
	sbx_sandbox_options_init(&so);
	if (argc > 3 && strcmp(argv[3], "passthrough") == 0)
		so.backend = SBX_BACKEND_PASSTHROUGH;
	else if (argc > 3 && strcmp(argv[3], "bwrap") == 0)
		so.backend = SBX_BACKEND_BWRAP;
	if (count == 0) {
		fprintf(stderr, "usage: %s [COUNT] [SHELL COMMAND] [auto|bwrap|passthrough]\n", argv[0]);
		return 2;
	}

	/* Each run in flight holds about four fds. */
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}

	struct event_base *base = event_base_new();
	sbx_policy *policy = sbx_policy_new();
	sbx_sandbox *sb = NULL;
	sbx_error err;
	if (!base || !policy || sbx_sandbox_new(base, policy, &so, &sb, &err) < 0) {
		fprintf(stderr, "parallel: %s\n", base && policy ? err.message : "out of memory");
		return 1;
	}
	sbx_policy_free(policy);

	struct tally t = {0};
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (unsigned i = 0; i < count; i++) {
		char env[32];
		snprintf(env, sizeof env, "RUN=%u", i);
		const char *envv[] = { env, NULL };
		sbx_run_options o;
		sbx_run_options_init(&o);
		o.shell = command;
		o.env = envv;
		o.timeout = 30;
		if (sbx_run_start(sb, &o, on_done, &t, NULL, &err) < 0) {
			fprintf(stderr, "parallel: run %u: %s\n", i, err.message);
			t.done++;
			t.failed++;
		}
	}
	event_base_dispatch(base);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;

	printf("%u runs on one loop (backend %s): %u ok, %u failed, %u timed out, "
	       "%zu bytes of output, %.2f s, %.0f runs/s\n",
	       t.done, sbx_sandbox_backend(sb), t.ok, t.failed, t.timed_out, t.bytes, secs,
	       (double)t.done / secs);
	sbx_sandbox_free(sb);
	event_base_free(base);
	return t.ok == count ? 0 : 1;
}
