/*
 * serve_conn.c -- one client of `sbx serve`: frames in, responses out.
 *
 * Input is read into a buffer of our own, never more than one frame of
 * --max-frame bytes plus what came with it: a frame's header is checked
 * against --max-frame before the buffer grows for its body.  A connection
 * with --max-pending requests unanswered, or whose unsent responses plus
 * the largest responses its unanswered requests could still make reach
 * SERVE_OUTPUT_BUDGET, is simply not read any more (push-back): the
 * client's writes then block in its kernel buffer, and our memory stays
 * where it is.  Reserving each request's largest response when it is
 * accepted is what makes the bound hold for a client that never reads:
 * results already on their way cannot pile up past it.
 *
 * A connection not being read is still watched for its peer going away
 * (EV_CLOSED on a socket, else a check once a second), or runs of a client
 * that left with --max-pending requests in flight would go on.
 *
 * A connection ends in one of four ways:
 *   - the peer goes away (end of input, or an error on either side): its
 *     queued requests are dropped and its runs cancelled at once;
 *   - a frame is malformed: the error response is written, then the same;
 *   - it has responses waiting and takes none of them for --send-timeout
 *     seconds: it is closed as if it had gone away, responses and all;
 *   - the server stops: serve_conn_free_all().
 * End of input counts as going away on a socket and on --stdio alike: a
 * client that wants its answers keeps its end open.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <event2/buffer.h>

#include "serve.h"

#define INPUT_INITIAL (64u * 1024u)
/* How often a connection not being read, whose fd cannot report its peer
 * leaving, is asked whether it has. */
#define HANGUP_POLL_SECONDS 1

struct serve_conn {
	struct server *srv;
	struct serve_conn *prev, *next;
	int rfd, wfd;                 /* the same socket, or stdin and stdout */
	struct event *rev, *wev;
	struct event *hup;            /* the peer going away while rev is off */
	bool hup_polls;               /* hup is a timer, not EV_CLOSED */
	struct event *kick;           /* reprocesses buffered input from the loop */
	struct event *linger;         /* ends a closing connection that does not read */
	struct event *stall;          /* ends a connection whose output does not move */
	uint8_t *in;                  /* unprocessed input is in[start, len) */
	size_t start, len, cap;
	struct evbuffer *out;
	struct serve_job *jobs;       /* accepted, not yet answered */
	unsigned pending;
	size_t reserved;              /* the sum of their job->reserve */
	bool reading, writing;
	bool closing;                 /* a bad frame: no more input; ends once flushed */
};

static void conn_free(struct serve_conn *c);
static void set_reading(struct serve_conn *c, bool want);

/* ------------------------------------------------------------- ending */

/* Queued jobs are forgotten; running ones are cancelled and finish in their
 * callback, which no longer finds the connection. */
static void drop_jobs(struct serve_conn *c)
{
	struct serve_job *job, *next;

	for (job = c->jobs; job; job = next) {
		next = job->next;
		job->conn = NULL;
		job->prev = job->next = NULL;
		if (job->run)
			sbx_run_cancel(job->run);
		else
			serve_job_drop(job);
	}
	c->jobs = NULL;
	c->pending = 0;
	c->reserved = 0;
}

static void conn_free(struct serve_conn *c)
{
	struct server *srv = c->srv;

	drop_jobs(c);
	if (c->prev)
		c->prev->next = c->next;
	else
		srv->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	srv->nconns--;
	event_free(c->rev);
	event_free(c->wev);
	event_free(c->hup);
	event_free(c->kick);
	event_free(c->linger);
	event_free(c->stall);
	evbuffer_free(c->out);
	close(c->rfd);
	if (c->wfd != c->rfd)
		close(c->wfd);
	free(c->in);
	free(c);

	/* A stdio server has one client; when it goes, so does the server.  A
	 * listening one may take a new client in the freed place. */
	if (srv->stdio && !srv->stopping) {
		srv->stopping = true;
		event_base_loopbreak(srv->base);
	} else if (srv->listen_ev && !srv->accepting && !srv->stopping &&
	           srv->nconns < srv->max_clients) {
		srv->accepting = true;
		event_add(srv->listen_ev, NULL);
	}
}

void serve_conn_free_all(struct server *srv)
{
	while (srv->conns)
		conn_free(srv->conns);
}

static void on_linger(evutil_socket_t fd, short what, void *arg)
{
	conn_free(arg);
}

/* Responses waited --send-timeout seconds without a byte taken: the client
 * is stuck or gone, and what we hold for it is freed. */
static void on_stall(evutil_socket_t fd, short what, void *arg)
{
	conn_free(arg);
}

/*
 * A malformed frame: answer it, stop reading, cancel the rest, and close
 * once the answer is written (or after SERVE_LINGER_SECONDS if the peer
 * does not read it).
 */
static void conn_fail(struct serve_conn *c, const char *message)
{
	struct timeval tv = {SERVE_LINGER_SECONDS, 0};

	serve_conn_send_error(c, NULL, WIRE_BAD_FRAME, message);
	c->closing = true;
	drop_jobs(c);
	set_reading(c, false);
	/* A pause that has just ended leaves reading off and the hang-up
	 * watch on until process_input() is done; a closing connection is
	 * not watched. */
	event_del(c->hup);
	event_add(c->linger, &tv);
}

/* ------------------------------------------------------------ output */

/* (Re)starts the --send-timeout clock: output is waiting, and none of it
 * has been taken since now. */
static void arm_stall(struct serve_conn *c)
{
	struct timeval tv = {(time_t)c->srv->send_timeout, 0};

	if (c->srv->send_timeout > 0)
		event_add(c->stall, &tv);
}

static void update_writing(struct serve_conn *c)
{
	bool want = evbuffer_get_length(c->out) > 0;

	if (want == c->writing)
		return;
	c->writing = want;
	if (want) {
		event_add(c->wev, NULL);
		arm_stall(c);
	} else {
		event_del(c->wev);
		event_del(c->stall);
	}
}

static void free_frame(const void *data, size_t len, void *arg)
{
	free((void *)data);
}

void serve_conn_send(struct serve_conn *c, msgpack_sbuffer *sb)
{
	size_t size = sb->size, alloc = sb->alloc;
	char *data = msgpack_sbuffer_release(sb), *smaller;

	/* The buffer grew by doubling; a frame that waits for a slow reader
	 * should not keep twice its size. */
	if (data && size > 0 && alloc - size > 4096 && (smaller = realloc(data, size)) != NULL)
		data = smaller;
	if (!data || size == 0 || evbuffer_add_reference(c->out, data, size, free_frame, NULL) < 0)
		free(data);
	update_writing(c);
}

void serve_conn_send_error(struct serve_conn *c, const uint64_t *id, const char *code,
                           const char *message)
{
	msgpack_sbuffer sb;

	msgpack_sbuffer_init(&sb);
	if (wire_pack_error(&sb, id, code, message) == 0)
		serve_conn_send(c, &sb);
	msgpack_sbuffer_destroy(&sb);
}

/*
 * Whether to stop reading: at --max-pending, or when what the connection's
 * responses take now and may still take reaches the budget.  A frame is
 * only handled while this is false, and a request's reservation is made as
 * it is accepted, so unsent + reserved never passes the budget by more than
 * one request's reservation (or one refusal, a frame of about a kilobyte).
 * What is reserved only becomes unsent, never more: on_run_done() refuses a
 * result larger than its reservation.
 */
static bool paused(const struct serve_conn *c)
{
	size_t unsent = evbuffer_get_length(c->out);

	return c->pending >= c->srv->max_pending || c->reserved >= SERVE_OUTPUT_BUDGET ||
	       unsent >= SERVE_OUTPUT_BUDGET - c->reserved;
}

static void on_writable(evutil_socket_t fd, short what, void *arg)
{
	struct serve_conn *c = arg;
	bool was_paused = paused(c);
	int n;

	n = evbuffer_write(c->out, c->wfd);
	if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
		/* EPIPE and the like: the client is gone. */
		conn_free(c);
		return;
	}
	if (n > 0 && evbuffer_get_length(c->out) > 0)
		arm_stall(c);
	update_writing(c);
	if (c->closing && evbuffer_get_length(c->out) == 0) {
		conn_free(c);
		return;
	}
	if (was_paused && !paused(c))
		event_active(c->kick, EV_READ, 0);
}

/* ------------------------------------------------------------- input */

/*
 * Reading and watching for hang-up take turns: reading sees the end of
 * input itself.  A closing connection is not watched: a client that shut
 * down its writing after a bad frame may still read the error, and the
 * linger timer ends it if not.
 */
static void set_reading(struct serve_conn *c, bool want)
{
	struct timeval tv = {HANGUP_POLL_SECONDS, 0};

	if (want == c->reading)
		return;
	c->reading = want;
	if (want) {
		event_del(c->hup);
		event_add(c->rev, NULL);
	} else {
		event_del(c->rev);
		if (!c->closing)
			event_add(c->hup, c->hup_polls ? &tv : NULL);
	}
}

static void update_reading(struct serve_conn *c)
{
	set_reading(c, !c->closing && !paused(c));
}

/*
 * Has the peer gone away?  Asked without reading, since the input waiting
 * may be requests we are not ready for: POLLHUP for a pipe whose writer
 * closed, POLLRDHUP for a socket whose peer closed or shut down writing.
 */
static bool peer_gone(int fd)
{
	struct pollfd p = {.fd = fd, .events = POLLIN | POLLRDHUP};

	return poll(&p, 1, 0) == 1 && (p.revents & (POLLHUP | POLLRDHUP | POLLERR | POLLNVAL));
}

/* EV_CLOSED fired, or it is time to ask. */
static void on_hangup(evutil_socket_t fd, short what, void *arg)
{
	struct serve_conn *c = arg;

	if (peer_gone(c->rfd))
		conn_free(c);
}

/* Moves the unprocessed input to the front and makes the buffer hold at
 * least |need| bytes in all; false when out of memory. */
static bool reserve(struct serve_conn *c, size_t need)
{
	uint8_t *bigger;
	size_t cap;

	if (c->start > 0) {
		memmove(c->in, c->in + c->start, c->len - c->start);
		c->len -= c->start;
		c->start = 0;
	}
	if (need <= c->cap)
		return true;
	cap = need > INPUT_INITIAL ? need : INPUT_INITIAL;
	bigger = realloc(c->in, cap);
	if (!bigger)
		return false;
	c->in = bigger;
	c->cap = cap;
	return true;
}

static void handle_frame(struct serve_conn *c, const uint8_t *body, size_t len)
{
	struct wire_request req;
	struct wire_error err;
	uint64_t id;

	if (wire_decode_request(body, len, &req, &err) == 0) {
		serve_job_submit(c->srv, c, &req);
		return;
	}
	wire_request_free(&req);
	if (strcmp(err.code, WIRE_BAD_FRAME) == 0)
		conn_fail(c, err.message);
	else
		serve_conn_send_error(c, wire_peek_id(body, len, &id) ? &id : NULL, err.code,
		                      err.message);
}

/*
 * Handles every whole frame in the buffer while the connection may take
 * more.  A header announcing more than --max-frame ends the connection
 * before a byte of its body is read or any room is made for it.
 */
static void process_input(struct serve_conn *c)
{
	char message[160];
	size_t avail;
	uint32_t flen;

	while (!c->closing && !paused(c)) {
		avail = c->len - c->start;
		if (avail < WIRE_HEADER_SIZE)
			break;
		flen = wire_frame_length(c->in + c->start);
		if (flen > c->srv->max_frame || flen == 0) {
			snprintf(message, sizeof(message),
			         flen ? "a frame of %u bytes is larger than the server's --max-frame of %zu"
			              : "a frame of %u bytes is empty; a frame holds one msgpack map",
			         flen, c->srv->max_frame);
			conn_fail(c, message);
			return;
		}
		if (avail < WIRE_HEADER_SIZE + (size_t)flen) {
			if (!reserve(c, WIRE_HEADER_SIZE + (size_t)flen))
				conn_fail(c, "the server is out of memory for this frame");
			break;
		}
		c->start += WIRE_HEADER_SIZE + flen;
		handle_frame(c, c->in + c->start - flen, flen);
	}
	if (c->start == c->len) {
		c->start = c->len = 0;
		/* Room made for one large frame is not kept for the next small ones. */
		if (c->cap > INPUT_INITIAL) {
			free(c->in);
			c->in = NULL;
			c->cap = 0;
		}
	}
	update_reading(c);
}

static void on_kick(evutil_socket_t fd, short what, void *arg)
{
	process_input(arg);
}

static void on_readable(evutil_socket_t fd, short what, void *arg)
{
	struct serve_conn *c = arg;
	ssize_t n;

	if (!reserve(c, c->len - c->start + 1)) {
		conn_fail(c, "the server is out of memory for this connection");
		return;
	}
	n = read(c->rfd, c->in + c->len, c->cap - c->len);
	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
		return;
	if (n <= 0) {
		conn_free(c);
		return;
	}
	c->len += (size_t)n;
	process_input(c);
}

/* ------------------------------------------------------------- jobs */

void serve_conn_add_job(struct serve_conn *c, struct serve_job *job)
{
	job->conn = c;
	job->prev = NULL;
	job->next = c->jobs;
	if (c->jobs)
		c->jobs->prev = job;
	c->jobs = job;
	c->pending++;
	/* Reading stops at the budget, so the sum is at most the budget plus
	 * one reservation (SIZE_MAX only for a --max-output past 2^61). */
	c->reserved = job->reserve < SIZE_MAX - c->reserved ? c->reserved + job->reserve : SIZE_MAX;
}

void serve_conn_job_done(struct serve_conn *c, struct serve_job *job)
{
	bool was_paused = paused(c);

	if (job->prev)
		job->prev->next = job->next;
	else
		c->jobs = job->next;
	if (job->next)
		job->next->prev = job->prev;
	job->prev = job->next = NULL;
	job->conn = NULL;
	c->pending--;
	c->reserved = c->reserved > job->reserve ? c->reserved - job->reserve : 0;
	/* The buffered input is handled from the loop, not from inside the
	 * run callback we may be called from. */
	if (was_paused && !paused(c))
		event_active(c->kick, EV_READ, 0);
}

bool serve_conn_has_id(const struct serve_conn *c, uint64_t id)
{
	const struct serve_job *job;

	for (job = c->jobs; job; job = job->next) {
		if (job->req.id == id)
			return true;
	}
	return false;
}

/* ------------------------------------------------------------- start */

static int set_nonblocking(int fd)
{
	int flags = fcntl(fd, F_GETFL);

	return flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0 ? -1 : 0;
}

/*
 * How a connection that is not being read notices its peer leave.  A
 * socket has EV_CLOSED (EPOLLRDHUP, or POLLRDHUP on the poll backend).  A
 * pipe never reports that, and a level-triggered read would fire without
 * end on the input we leave unread (EV_ET would not, but the poll and
 * select backends have no EV_ET); so a pipe, or any fd on a loop without
 * EV_CLOSED, is asked once a second instead.
 */
static struct event *hangup_watch(struct serve_conn *c)
{
	struct event_base *base = c->srv->base;
	struct stat st;

	if (fstat(c->rfd, &st) == 0 && S_ISSOCK(st.st_mode) &&
	    (event_base_get_features(base) & EV_FEATURE_EARLY_CLOSE))
		return event_new(base, c->rfd, EV_CLOSED | EV_PERSIST, on_hangup, c);
	c->hup_polls = true;
	return event_new(base, -1, EV_PERSIST, on_hangup, c);
}

/* Takes |rfd| and |wfd| over (closing them on failure). */
int serve_conn_new(struct server *srv, int rfd, int wfd)
{
	struct serve_conn *c = calloc(1, sizeof(*c));

	if (!c || set_nonblocking(rfd) < 0 || set_nonblocking(wfd) < 0)
		goto fail;
	c->srv = srv;
	c->rfd = rfd;
	c->wfd = wfd;
	c->rev = event_new(srv->base, rfd, EV_READ | EV_PERSIST, on_readable, c);
	c->wev = event_new(srv->base, wfd, EV_WRITE | EV_PERSIST, on_writable, c);
	c->hup = hangup_watch(c);
	c->kick = event_new(srv->base, -1, 0, on_kick, c);
	c->linger = evtimer_new(srv->base, on_linger, c);
	c->stall = evtimer_new(srv->base, on_stall, c);
	c->out = evbuffer_new();
	if (!c->rev || !c->wev || !c->hup || !c->kick || !c->linger || !c->stall || !c->out ||
	    event_add(c->rev, NULL) < 0)
		goto fail;
	c->reading = true;
	c->next = srv->conns;
	if (srv->conns)
		srv->conns->prev = c;
	srv->conns = c;
	srv->nconns++;
	return 0;
fail:
	if (c) {
		if (c->rev)
			event_free(c->rev);
		if (c->wev)
			event_free(c->wev);
		if (c->hup)
			event_free(c->hup);
		if (c->kick)
			event_free(c->kick);
		if (c->linger)
			event_free(c->linger);
		if (c->stall)
			event_free(c->stall);
		if (c->out)
			evbuffer_free(c->out);
		free(c);
	}
	close(rfd);
	if (wfd != rfd)
		close(wfd);
	return -1;
}
