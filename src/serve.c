/*
 * serve.c -- `sbx serve`: the msgpack wire protocol (DESIGN.md) on stdin and
 * stdout or on a unix socket, one session, one loop.
 *
 * Start: options (those of run give the base policy), the session, then the
 * socket or the stdio connection, then the signals.  End, on SIGTERM, SIGINT
 * or SIGHUP, or when the stdio client goes away: stop accepting, drop every
 * connection (cancelling its runs), close the session, which kills and reaps
 * every run still in flight, remove the socket, exit 0.
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "serve.h"

static const int stop_signals[] = {SIGTERM, SIGINT, SIGHUP};
#define NSTOP_SIGNALS (sizeof(stop_signals) / sizeof(stop_signals[0]))

/* Accepting again after EMFILE and the like, once some fds may be free. */
#define ACCEPT_RETRY_MS 100

enum {
	OPT_STDIO = CLI_EXTRA_OPTION,
	OPT_LISTEN,
	OPT_MAX_FRAME,
	OPT_MAX_RUNS,
	OPT_MAX_PENDING,
	OPT_MAX_CLIENTS,
	OPT_SEND_TIMEOUT,
};

static const struct option serve_options[] = {
	{"stdio", no_argument, NULL, OPT_STDIO},
	{"listen", required_argument, NULL, OPT_LISTEN},
	{"max-frame", required_argument, NULL, OPT_MAX_FRAME},
	{"max-runs", required_argument, NULL, OPT_MAX_RUNS},
	{"max-pending", required_argument, NULL, OPT_MAX_PENDING},
	{"max-clients", required_argument, NULL, OPT_MAX_CLIENTS},
	{"send-timeout", required_argument, NULL, OPT_SEND_TIMEOUT},
	{NULL, 0, NULL, 0},
};

static void print_serve_usage(FILE *f)
{
	fputs("usage: sbx serve --stdio [OPTIONS]\n"
	      "       sbx serve --listen unix:PATH [OPTIONS]\n\n"
	      "Runs the requests of the msgpack wire protocol, each in the sandbox of\n"
	      "the base policy the options give, or of a narrower one it asks for.\n\n"
	      "Options of serve:\n"
	      "      --stdio              one client on stdin and stdout\n"
	      "      --listen unix:PATH   clients on a unix socket, created mode 0600\n"
	      "      --max-frame SIZE     largest request frame (default 1M)\n"
	      "      --max-runs N         runs in flight at once; the rest wait (default 32)\n"
	      "      --max-pending N      unanswered requests per client before it is\n"
	      "                           no longer read (default 32)\n"
	      "      --max-clients N      clients at once (default 64)\n"
	      "      --send-timeout N     close a client that takes none of its responses\n"
	      "                           for N seconds, killing its runs; 0 means never\n"
	      "                           (default 60)\n\n"
	      "--timeout and --max-output are the defaults and the most a request may ask;\n"
	      "-c, --stdin, --input and --json are for run only.\n\n",
	      f);
	cli_print_run_options(f);
}

/* A count option of serve: a whole number from |min| (0 or 1) to 1000000. */
static int parse_limit(const char *opt, const char *text, unsigned long min, unsigned *out)
{
	unsigned long v;
	char *end;

	errno = 0;
	v = strtoul(text, &end, 10);
	if (text[0] < '0' || text[0] > '9' || *end != '\0' || errno == ERANGE || v < min ||
	    v > 1000000) {
		cli_error("%s '%s' is not a whole number from %lu to 1000000", opt, text, min);
		return -1;
	}
	*out = (unsigned)v;
	return 0;
}

static int apply_serve_option(int opt, const char *arg, void *ctx)
{
	struct server *srv = ctx;
	sbx_error err;
	uint64_t size;

	switch (opt) {
	case 'h':
		print_serve_usage(stdout);
		return 0;
	case OPT_STDIO:
		srv->stdio = true;
		return 0;
	case OPT_LISTEN:
		srv->listen = arg;
		return 0;
	case OPT_MAX_FRAME:
		if (sbx_parse_size(arg, "--max-frame", &size, &err) < 0) {
			cli_error("%s", err.message);
			return -1;
		}
		/* The header holds 32 bits, and a frame lives in memory whole. */
		if (size > UINT32_MAX || size < 16) {
			cli_error("--max-frame '%s' is not from 16 bytes to 4G-1", arg);
			return -1;
		}
		srv->max_frame = (size_t)size;
		return 0;
	case OPT_MAX_RUNS:
		return parse_limit("--max-runs", arg, 1, &srv->max_runs);
	case OPT_MAX_PENDING:
		return parse_limit("--max-pending", arg, 1, &srv->max_pending);
	case OPT_MAX_CLIENTS:
		return parse_limit("--max-clients", arg, 1, &srv->max_clients);
	case OPT_SEND_TIMEOUT:
		return parse_limit("--send-timeout", arg, 0, &srv->send_timeout);
	}
	return -1;
}

/* What run takes and serve has no use for is refused, not ignored. */
static int check_options(const struct server *srv)
{
	const struct cli_run *cr = &srv->cli;

	if (cr->run.shell || cr->json || cr->run.stdin_data) {
		cli_error("-c, --json, --stdin and --input are options of 'sbx run'; requests of "
		          "serve carry their own");
		return -1;
	}
	if (srv->stdio == (srv->listen != NULL)) {
		cli_error("give exactly one of --stdio and --listen unix:PATH");
		return -1;
	}
	if (srv->listen && strncmp(srv->listen, "unix:", 5) != 0) {
		cli_error("--listen '%s' is not unix:PATH", srv->listen);
		return -1;
	}
	return 0;
}

/* ------------------------------------------------------------ socket */

static void on_accept_retry(evutil_socket_t fd, short what, void *arg)
{
	struct server *srv = arg;

	if (!srv->stopping && !srv->accepting && srv->nconns < srv->max_clients) {
		srv->accepting = true;
		event_add(srv->listen_ev, NULL);
	}
}

static void pause_accepting(struct server *srv, bool retry)
{
	struct timeval tv = {0, ACCEPT_RETRY_MS * 1000};

	if (srv->accepting) {
		event_del(srv->listen_ev);
		srv->accepting = false;
	}
	if (retry)
		event_add(srv->accept_retry, &tv);
}

static void on_accept(evutil_socket_t fd, short what, void *arg)
{
	struct server *srv = arg;
	int client;

	while (srv->accepting) {
		client = accept4(srv->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (client < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			/* Out of fds or memory: the socket stays readable, so keep
			 * still for a moment instead of spinning on it. */
			if (errno != EAGAIN && errno != EWOULDBLOCK)
				pause_accepting(srv, true);
			return;
		}
		if (serve_conn_new(srv, client, client) < 0) {
			pause_accepting(srv, true);
			return;
		}
		if (srv->nconns >= srv->max_clients)
			pause_accepting(srv, false);
	}
}

/*
 * A socket file already at |path| is replaced only when nobody listens on
 * it (connecting is refused): a live server keeps its socket, and a file
 * that is not a socket is never removed.
 */
static int clear_stale_socket(const char *path, const struct sockaddr_un *addr)
{
	struct stat st;
	int fd, rc;

	if (lstat(path, &st) < 0) {
		if (errno == ENOENT)
			return 0;
		cli_error("socket '%s': %s", path, strerror(errno));
		return -1;
	}
	if (!S_ISSOCK(st.st_mode)) {
		cli_error("'%s' exists and is not a socket; not replacing it", path);
		return -1;
	}
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		cli_error("socket: %s", strerror(errno));
		return -1;
	}
	rc = connect(fd, (const struct sockaddr *)addr, sizeof(*addr));
	if (rc == 0 || errno == EAGAIN || errno == EINPROGRESS) {
		close(fd);
		cli_error("'%s' is the socket of a server that is running", path);
		return -1;
	}
	close(fd);
	if (errno != ECONNREFUSED) {
		cli_error("socket '%s': %s", path, strerror(errno));
		return -1;
	}
	if (unlink(path) < 0 && errno != ENOENT) {
		cli_error("cannot remove the stale socket '%s': %s", path, strerror(errno));
		return -1;
	}
	return 0;
}

static int open_listener(struct server *srv)
{
	const char *path = srv->listen + strlen("unix:");
	struct sockaddr_un addr;
	struct stat st;
	mode_t old;
	int rc;

	memset(&addr, 0, sizeof(addr));
	addr.sun_family = AF_UNIX;
	if (path[0] == '\0' || strlen(path) >= sizeof(addr.sun_path)) {
		cli_error("--listen '%s': the path must have 1 to %zu bytes", srv->listen,
		          sizeof(addr.sun_path) - 1);
		return -1;
	}
	memcpy(addr.sun_path, path, strlen(path));
	if (clear_stale_socket(path, &addr) < 0)
		return -1;
	srv->listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (srv->listen_fd < 0) {
		cli_error("socket: %s", strerror(errno));
		return -1;
	}
	/* The socket file is born 0600: no moment in which others may connect. */
	old = umask(0177);
	rc = bind(srv->listen_fd, (struct sockaddr *)&addr, sizeof(addr));
	umask(old);
	if (rc < 0) {
		cli_error("cannot bind '%s': %s", path, strerror(errno));
		return -1;
	}
	/* From here on the socket file is ours, and close_listener() removes it. */
	srv->sock_path = strdup(path);
	if (!srv->sock_path) {
		unlink(path);
		cli_error("out of memory");
		return -1;
	}
	if (lstat(path, &st) < 0) {
		cli_error("socket '%s': %s", path, strerror(errno));
		unlink(path);
		return -1;
	}
	srv->sock_dev = st.st_dev;
	srv->sock_ino = st.st_ino;
	if (listen(srv->listen_fd, 128) < 0) {
		cli_error("cannot listen on '%s': %s", path, strerror(errno));
		return -1;
	}
	srv->listen_ev = event_new(srv->base, srv->listen_fd, EV_READ | EV_PERSIST, on_accept, srv);
	srv->accept_retry = evtimer_new(srv->base, on_accept_retry, srv);
	if (!srv->listen_ev || !srv->accept_retry || event_add(srv->listen_ev, NULL) < 0) {
		cli_error("cannot watch '%s'", path);
		return -1;
	}
	srv->accepting = true;
	return 0;
}

/* Removes the socket file, unless another server has put its own there. */
static void close_listener(struct server *srv)
{
	struct stat st;

	if (srv->listen_ev)
		event_free(srv->listen_ev);
	if (srv->accept_retry)
		event_free(srv->accept_retry);
	srv->listen_ev = srv->accept_retry = NULL;
	srv->accepting = false;
	if (srv->listen_fd >= 0)
		close(srv->listen_fd);
	srv->listen_fd = -1;
	if (srv->sock_path && lstat(srv->sock_path, &st) == 0 && st.st_dev == srv->sock_dev &&
	    st.st_ino == srv->sock_ino)
		unlink(srv->sock_path);
	free(srv->sock_path);
	srv->sock_path = NULL;
}

/* ----------------------------------------------------------- session */

/* The session, and the policy requests must narrow: the base policy plus
 * the session's workspace and scratch directory, which runs may write. */
static int open_session(struct server *srv)
{
	sbx_session_options opts;
	sbx_error err;

	sbx_session_options_init(&opts);
	opts.workspace = srv->cli.cwd;
	opts.sandbox = srv->cli.sandbox;
	if (sbx_session_open(srv->base, srv->cli.policy, &opts, &srv->session, &err) < 0) {
		cli_error("%s", err.message);
		return -1;
	}
	srv->effective = sbx_policy_copy(srv->cli.policy);
	if (!srv->effective ||
	    sbx_policy_add_writable(srv->effective, sbx_session_workspace(srv->session), &err) < 0 ||
	    sbx_policy_add_writable(srv->effective, sbx_session_scratch(srv->session), &err) < 0) {
		cli_error("%s", srv->effective ? err.message : "out of memory");
		return -1;
	}
	return 0;
}

/* ------------------------------------------------------------- loop */

static void on_stop_signal(evutil_socket_t signo, short what, void *arg)
{
	struct server *srv = arg;

	srv->stopping = true;
	event_base_loopbreak(srv->base);
}

/* Runs the loop until a stop signal or, with --stdio, until the client goes. */
static int serve(struct server *srv)
{
	struct event *signals[NSTOP_SIGNALS] = {0};
	int status = CLI_EXIT_FAILURE;
	size_t i;

	for (i = 0; i < NSTOP_SIGNALS; i++) {
		signals[i] = evsignal_new(srv->base, stop_signals[i], on_stop_signal, srv);
		if (!signals[i] || evsignal_add(signals[i], NULL) < 0) {
			cli_error("cannot watch signal %s", strsignal(stop_signals[i]));
			goto out;
		}
	}
	srv->pump = event_new(srv->base, -1, 0, serve_pump, srv);
	if (!srv->pump) {
		cli_error("out of memory");
		goto out;
	}
	if (srv->stdio ? serve_conn_new(srv, STDIN_FILENO, STDOUT_FILENO) < 0
	               : open_listener(srv) < 0) {
		if (srv->stdio)
			cli_error("cannot serve on stdin and stdout: %s", strerror(errno));
		goto out;
	}
	if (event_base_dispatch(srv->base) < 0) {
		cli_error("the event loop failed");
		goto out;
	}
	status = 0;
out:
	srv->stopping = true;
	close_listener(srv);
	serve_conn_free_all(srv);
	/* Runs still in flight are cancelled and reaped here; their callbacks
	 * find no connection and only free their job. */
	sbx_session_free(srv->session);
	srv->session = NULL;
	if (srv->pump)
		event_free(srv->pump);
	for (i = 0; i < NSTOP_SIGNALS; i++) {
		if (signals[i])
			event_free(signals[i]);
	}
	return status;
}

int cli_cmd_serve(int argc, char **argv)
{
	struct server srv;
	int status = CLI_EXIT_FAILURE;

	memset(&srv, 0, sizeof(srv));
	srv.listen_fd = -1;
	srv.max_frame = WIRE_DEFAULT_MAX_FRAME;
	srv.max_runs = SERVE_DEFAULT_MAX_RUNS;
	srv.max_pending = SERVE_DEFAULT_MAX_PENDING;
	srv.max_clients = SERVE_DEFAULT_MAX_CLIENTS;
	srv.send_timeout = SERVE_DEFAULT_SEND_TIMEOUT;
	switch (cli_parse_base(argc, argv, serve_options, apply_serve_option, &srv, &srv.cli)) {
	case CLI_PARSE_HELP:
		return 0;
	case CLI_PARSE_FAILED:
		return CLI_EXIT_FAILURE;
	case CLI_PARSE_OK:
		break;
	}
	if (check_options(&srv) < 0)
		goto out;
	srv.base = event_base_new();
	if (!srv.base) {
		cli_error("cannot create an event loop");
		goto out;
	}
	if (open_session(&srv) < 0) {
		sbx_session_free(srv.session);
		goto out;
	}
	status = serve(&srv);
out:
	sbx_policy_free(srv.effective);
	if (srv.base)
		event_base_free(srv.base);
	cli_run_release(&srv.cli);
	return status;
}
