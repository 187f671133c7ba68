/*
 * serve.h -- what the parts of `sbx serve` share.
 *
 *   serve.c         the command line, the listening socket, signals, start
 *                   and end of the server
 *   serve_conn.c    connections: frames in, responses out, push-back
 *   serve_job.c     requests: checked against the base policy, queued under
 *                   the server-wide cap, run in the session, answered
 *   serve_result.c  a result as the msgpack "result" map
 *   wire.c          the bounded decoder and the frame helpers (wire.h)
 *
 * Ownership: the server owns its connections and its queue; a connection
 * owns its jobs until they start; a started job is owned by its run's
 * callback, and only points back at its connection, a pointer cleared when
 * the connection goes away first.
 */
#ifndef SBX_SERVE_H
#define SBX_SERVE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <event2/event.h>

#include "cli.h"
#include "wire.h"

/* Defaults of the options that are serve's own. */
#define SERVE_DEFAULT_MAX_RUNS 32
#define SERVE_DEFAULT_MAX_PENDING 32
#define SERVE_DEFAULT_MAX_CLIENTS 64
/*
 * A connection is not read while its unsent responses plus the largest
 * responses its requests in flight could still make (serve_result_bound())
 * reach this: a client that does not read its answers then holds at most
 * this much of the server's memory plus one result, however many requests
 * it sent.  At the default --max-output of 1M a result may take about 6 MiB
 * (every byte not UTF-8 becomes a 3-byte U+FFFD), so about six such
 * requests are in flight per client; smaller max_output allows more.
 */
#define SERVE_OUTPUT_BUDGET (32u * 1024u * 1024u)
/* What a result may take besides its stdout and stderr: keys, numbers, the
 * error (at most SBX_ERROR_MAX bytes, tripled when not UTF-8) and the
 * warnings, which are the library's own sentences. */
#define SERVE_RESULT_OVERHEAD (64u * 1024u)
/* Default --send-timeout: a connection with responses to send that takes
 * none of them for this long is closed, and its runs killed. */
#define SERVE_DEFAULT_SEND_TIMEOUT 60
/* How long a connection closed for a bad frame may take to read its error. */
#define SERVE_LINGER_SECONDS 5

struct serve_conn;
struct serve_job;

struct server {
	struct event_base *base;
	struct cli_run cli;           /* the base policy, sandbox options, default timeout and max_output */
	sbx_policy *effective;        /* the base policy plus the session's directories: what requests narrow */
	sbx_session *session;

	size_t max_frame;
	unsigned max_runs, max_pending, max_clients;
	unsigned send_timeout;        /* seconds; 0: never */
	bool stdio;
	const char *listen;           /* "unix:PATH" as given */

	struct serve_conn *conns;     /* every open connection */
	unsigned nconns;
	struct serve_job *queue_head; /* accepted, waiting for a run slot, oldest first */
	struct serve_job *queue_tail;
	unsigned running;             /* started runs whose callback has not fired */
	struct event *pump;           /* starts queued jobs, from the loop */

	int listen_fd;
	struct event *listen_ev;
	struct event *accept_retry;   /* accepting paused after EMFILE and the like */
	bool accepting;
	char *sock_path;              /* the socket we made, removed at the end */
	dev_t sock_dev;
	ino_t sock_ino;

	bool stopping;
};

/* A request accepted from a connection. */
struct serve_job {
	struct server *srv;
	struct serve_conn *conn;      /* NULL once the connection is gone */
	struct serve_job *prev, *next;            /* in conn->jobs */
	struct serve_job *qprev, *qnext;          /* in the server's queue */
	bool queued;
	struct wire_request req;
	sbx_policy *policy;           /* the request's own, or NULL */
	sbx_run *run;                 /* while it runs */
	size_t reserve;               /* the largest response it can have (serve_result_bound()) */
};

/* serve_conn.c */
int serve_conn_new(struct server *srv, int rfd, int wfd);
/* Drops every connection at once, cancelling their runs (at shutdown). */
void serve_conn_free_all(struct server *srv);
/* Queues a whole frame in |sb| (taken over, left empty) for |c|. */
void serve_conn_send(struct serve_conn *c, msgpack_sbuffer *sb);
/* Sends an error response; |id| may be NULL when the request had none. */
void serve_conn_send_error(struct serve_conn *c, const uint64_t *id, const char *code,
                           const char *message);
/* A job of |c| was answered or dropped: it may read again. */
void serve_conn_job_done(struct serve_conn *c, struct serve_job *job);
/* Is |id| the id of a job of |c| not yet answered? */
bool serve_conn_has_id(const struct serve_conn *c, uint64_t id);
/* Adds |job| to the jobs of |c|, reserving job->reserve of its output budget. */
void serve_conn_add_job(struct serve_conn *c, struct serve_job *job);

/* serve_job.c */
/* Takes a decoded request of |c| over: answers it at once when it is refused,
 * else queues it.  Frees |req|'s contents either way. */
void serve_job_submit(struct server *srv, struct serve_conn *c, struct wire_request *req);
/* Forgets a job that has not started (its connection went away). */
void serve_job_drop(struct serve_job *job);
/* Starts queued jobs while the server-wide cap allows; run from the loop. */
void serve_pump(evutil_socket_t fd, short what, void *arg);

/* serve_result.c */
/* Packs the whole response frame {"id": id, "result": {...}} into |sb|. */
int serve_pack_result(msgpack_sbuffer *sb, uint64_t id, const sbx_result *r);
/* The most bytes that frame can take for a run that keeps |max_output|
 * bytes per stream; SIZE_MAX when that does not fit in a size_t. */
size_t serve_result_bound(uint64_t max_output);

#endif /* SBX_SERVE_H */
