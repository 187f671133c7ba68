/*
 * sbx.c -- the sbx program: picks the subcommand and runs `sbx run` on a
 * libevent loop of its own.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "cli.h"

/*
 * The signals that end sbx from a terminal or a supervisor.  The command runs
 * in a session of its own, so it never sees them; sbx cancels the run, which
 * kills the command's whole tree, instead of dying and leaving it behind.
 */
static const int cancel_signals[] = {SIGINT, SIGTERM, SIGHUP};
#define NCANCEL_SIGNALS (sizeof(cancel_signals) / sizeof(cancel_signals[0]))

/* One `sbx run`, as the callbacks on the loop see it. */
struct run_state {
	sbx_run *run;          /* NULL once the result has arrived */
	sbx_result *result;    /* owned */
	struct event *signals[NCANCEL_SIGNALS];
	int caught;            /* the signal that made us cancel the run, or 0 */
	bool closed[2];        /* our stdout or stderr no longer takes output */
};

static void print_usage(FILE *f, bool full)
{
	fputs("usage: sbx run   [OPTIONS] -- PROGRAM [ARG...]\n"
	      "       sbx run   [OPTIONS] -c 'SHELL COMMAND'\n"
	      "       sbx wrap  [OPTIONS] -- PROGRAM [ARG...]\n"
	      "       sbx caps  [--json]\n"
	      "       sbx serve [--stdio | --listen unix:PATH] [OPTIONS]\n"
	      "       sbx bench [--backend NAME] [--runs N] [--concurrency N] [--json] [-- PROGRAM...]\n"
	      "       sbx --help | --version\n",
	      f);
	if (!full)
		return;
	fputs("\nRuns untrusted commands in an operating-system sandbox.\n\n", f);
	cli_print_run_options(f);
	fputs("\nExit status of run: the command's own; 128+N when signal N ended it;\n"
	      "124 when it timed out; 125 when sbx itself failed; 126 when the program\n"
	      "exists but cannot be run; 127 when it is not found.\n",
	      f);
}

/*
 * Writes all of |data| to |fd|.  A reader that has gone away (EPIPE; SIGPIPE
 * is ignored) or any other error marks the stream closed and the rest of its
 * output is dropped, while the run goes on.  When |fd| is nonblocking we wait
 * for it: that stalls the loop, so the command blocks on its full pipe and a
 * slow reader slows it down instead of growing our memory.
 */
static void write_all(int fd, const char *data, size_t len, bool *closed)
{
	struct pollfd pfd = {.fd = fd, .events = POLLOUT};
	ssize_t n;

	while (len > 0 && !*closed) {
		n = write(fd, data, len);
		if (n > 0) {
			data += n;
			len -= (size_t)n;
		} else if (n < 0 && errno == EINTR) {
			continue;
		} else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			poll(&pfd, 1, -1);
		} else {
			*closed = true;
		}
	}
}

static void on_output(enum sbx_stream stream, const char *data, size_t len, void *arg)
{
	struct run_state *st = arg;

	write_all(stream == SBX_STDOUT ? STDOUT_FILENO : STDERR_FILENO, data, len,
	          &st->closed[stream]);
}

static void on_signal(evutil_socket_t signo, short what, void *arg)
{
	struct run_state *st = arg;

	st->caught = (int)signo;
	if (st->run)
		sbx_run_cancel(st->run);
}

/* The run is over; dropping the signal events lets event_base_dispatch return. */
static void on_done(sbx_result *result, void *arg)
{
	struct run_state *st = arg;
	size_t i;

	st->result = result;
	st->run = NULL;
	for (i = 0; i < NCANCEL_SIGNALS; i++)
		event_del(st->signals[i]);
}

/* DESIGN.md's exit statuses; |caught| is the signal that made us cancel, or 0. */
static int exit_status(const sbx_result *r, int caught)
{
	if (caught && r->cancelled)
		return CLI_EXIT_SIGNAL_BASE + caught;
	if (r->timed_out)
		return CLI_EXIT_TIMEOUT;
	if (r->error) {
		/* Without an errno the failure was in setting up the sandbox, not in
		 * the program. */
		if (r->start_errno == ENOENT)
			return CLI_EXIT_NOT_FOUND;
		return r->start_errno ? CLI_EXIT_CANNOT_RUN : CLI_EXIT_FAILURE;
	}
	if (r->exited)
		return r->exit_code;
	if (r->signal > 0)
		return CLI_EXIT_SIGNAL_BASE + r->signal;
	return CLI_EXIT_FAILURE;
}

static int print_json(const sbx_result *r)
{
	json_t *obj = cli_result_json(r);
	int rc;

	if (!obj) {
		cli_error("out of memory while building the JSON result");
		return -1;
	}
	/* Nine digits keep nanoseconds of a short run without printing the
	 * binary noise of the double ("0.00099799999999999997"). */
	rc = json_dumpf(obj, stdout, JSON_INDENT(2) | JSON_REAL_PRECISION(9));
	json_decref(obj);
	if (rc < 0 || fputc('\n', stdout) == EOF || fflush(stdout) == EOF) {
		cli_error("cannot write the result: %s", strerror(errno));
		return -1;
	}
	return 0;
}

/* The output went out as it arrived; what is left is what sbx has to say. */
static void print_notes(const sbx_result *r)
{
	unsigned i;

	for (i = 0; i < r->resources.nwarnings && i < SBX_MAX_WARNINGS; i++)
		cli_error("warning: %s", r->resources.warnings[i]);
	if (r->error)
		cli_error("%s", r->error);
}

static int run_command(struct cli_run *cr)
{
	struct run_state st = {0};
	struct event_base *base;
	sbx_session *session = NULL;
	sbx_session_options so;
	sbx_error err;
	int status = CLI_EXIT_FAILURE;
	size_t i;

	base = event_base_new();
	if (!base) {
		cli_error("cannot create an event loop");
		return CLI_EXIT_FAILURE;
	}
	/* A session gives the run its workspace (a private one, removed at the
	 * end, without -w) and its TMPDIR. */
	sbx_session_options_init(&so);
	so.workspace = cr->cwd;
	so.sandbox = cr->sandbox;
	if (sbx_session_open(base, cr->policy, &so, &session, &err) < 0) {
		cli_error("%s", err.message);
		goto out;
	}
	for (i = 0; i < NCANCEL_SIGNALS; i++) {
		st.signals[i] = evsignal_new(base, cancel_signals[i], on_signal, &st);
		if (!st.signals[i] || evsignal_add(st.signals[i], NULL) < 0) {
			cli_error("cannot watch signal %s", strsignal(cancel_signals[i]));
			goto out;
		}
	}
	if (!cr->json) {
		cr->run.on_output = on_output;
		cr->run.on_output_arg = &st;
	}
	if (sbx_session_run_start(session, &cr->run, on_done, &st, &st.run, &err) < 0) {
		cli_error("%s", err.message);
		goto out;
	}
	if (event_base_dispatch(base) < 0 || !st.result) {
		cli_error("the event loop stopped before the run ended");
		goto out;
	}

	status = exit_status(st.result, st.caught);
	if (cr->json) {
		if (print_json(st.result) < 0)
			status = CLI_EXIT_FAILURE;
	} else {
		print_notes(st.result);
	}
out:
	/* A run still in flight delivers its result from inside the close, so
	 * the result is freed after it. */
	if (session && sbx_session_close(session, &err) < 0) {
		cli_error("%s", err.message);
		if (status == 0)
			status = CLI_EXIT_FAILURE;
	}
	sbx_session_free(session);
	sbx_result_free(st.result);
	for (i = 0; i < NCANCEL_SIGNALS; i++) {
		if (st.signals[i])
			event_free(st.signals[i]);
	}
	event_base_free(base);
	return status;
}

static int cmd_run(int argc, char **argv)
{
	struct cli_run cr;
	int status;

	switch (cli_parse_run(argc, argv, &cr)) {
	case CLI_PARSE_HELP:
		return 0;
	case CLI_PARSE_FAILED:
		return CLI_EXIT_FAILURE;
	case CLI_PARSE_OK:
		break;
	}
	status = run_command(&cr);
	cli_run_release(&cr);
	return status;
}

/* A subcommand; the ones without a function come in later issues. */
struct command {
	const char *name;
	int (*main)(int argc, char **argv);
};

static const struct command commands[] = {
	{"run", cmd_run},
	{"wrap", cli_cmd_wrap},
	{"caps", cli_cmd_caps},
	{"serve", cli_cmd_serve},
	{"bench", cli_cmd_bench},
};

int main(int argc, char **argv)
{
	const char *name = argc > 1 ? argv[1] : NULL;
	size_t i;

	/* A reader that goes away must not kill sbx before it has killed the
	 * command and said how it ended; write_all() sees EPIPE instead. */
	signal(SIGPIPE, SIG_IGN);

	if (!name) {
		print_usage(stderr, false);
		return CLI_EXIT_FAILURE;
	}
	if (strcmp(name, "--help") == 0 || strcmp(name, "-h") == 0) {
		print_usage(stdout, true);
		return 0;
	}
	if (strcmp(name, "--version") == 0) {
		printf("sbx %s\n", PACKAGE_VERSION);
		return 0;
	}
	for (i = 0; i < sizeof(commands) / sizeof(commands[0]); i++) {
		if (strcmp(name, commands[i].name) != 0)
			continue;
		if (!commands[i].main) {
			cli_error("'%s' is not implemented yet", name);
			return CLI_EXIT_FAILURE;
		}
		return commands[i].main(argc - 1, argv + 1);
	}
	if (name[0] == '-')
		cli_error("unknown option '%s'; try 'sbx --help'", name);
	else
		cli_error("unknown command '%s'; try 'sbx --help'", name);
	return CLI_EXIT_FAILURE;
}
