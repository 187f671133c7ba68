/*
 * serve_job.c -- a request of `sbx serve`, from decoded frame to response.
 *
 * A request is checked against the server before it waits for anything:
 * its id must not be in flight on its connection already, its timeout and
 * max_output must not pass the server's, and its policy must narrow the base
 * policy.  Refusals are answered at once.  Accepted jobs wait in one queue,
 * oldest first, until fewer than --max-runs runs are in flight; the run's
 * callback answers and frees the job.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serve.h"

/* Library messages can quote request paths, which may be any bytes but NUL. */
#define MESSAGE_MAX 1024

struct refusal {
	const char *code;
	char message[MESSAGE_MAX];
};

static int refuse(struct refusal *why, const char *code, const char *prefix, const char *text)
{
	size_t n = strlen(prefix) < 128 ? strlen(prefix) : 128;

	why->code = code;
	memcpy(why->message, prefix, n);
	/* Everything we send as a msgpack str must be UTF-8; quoting makes the
	 * text ASCII, which is. */
	wire_quote(why->message + n, sizeof(why->message) - n, (const uint8_t *)text, strlen(text),
	           800);
	return -1;
}

/* ------------------------------------------------------------- queue */

static void enqueue(struct server *srv, struct serve_job *job)
{
	job->qnext = NULL;
	job->qprev = srv->queue_tail;
	if (srv->queue_tail)
		srv->queue_tail->qnext = job;
	else
		srv->queue_head = job;
	srv->queue_tail = job;
	job->queued = true;
}

static void dequeue(struct server *srv, struct serve_job *job)
{
	if (job->qprev)
		job->qprev->qnext = job->qnext;
	else
		srv->queue_head = job->qnext;
	if (job->qnext)
		job->qnext->qprev = job->qprev;
	else
		srv->queue_tail = job->qprev;
	job->qprev = job->qnext = NULL;
	job->queued = false;
}

static void job_free(struct serve_job *job)
{
	wire_request_free(&job->req);
	sbx_policy_free(job->policy);
	free(job);
}

void serve_job_drop(struct serve_job *job)
{
	if (job->queued)
		dequeue(job->srv, job);
	job_free(job);
}

/* ------------------------------------------------------------ checks */

/* A request's timeout and max_output are limits too: never above the server's. */
static int check_limits(const struct server *srv, const struct wire_request *req,
                        struct refusal *why)
{
	double base = srv->cli.run.timeout;
	char text[256];

	if (req->has_timeout && base > 0 && (req->timeout == 0 || req->timeout > base)) {
		snprintf(text, sizeof(text), "%g%s is longer than the server's %g seconds",
		         req->timeout, req->timeout == 0 ? " (none)" : "", base);
		return refuse(why, WIRE_POLICY_WIDENED, "timeout: ", text);
	}
	if (req->has_max_output && req->max_output > srv->cli.run.max_output) {
		snprintf(text, sizeof(text), "%llu is more than the server's %zu bytes",
		         (unsigned long long)req->max_output, srv->cli.run.max_output);
		return refuse(why, WIRE_POLICY_WIDENED, "max_output: ", text);
	}
	return 0;
}

static bool has(const struct wire_policy *wp, enum wire_policy_field f)
{
	return (wp->set & (1u << f)) != 0;
}

typedef int (*add_path_fn)(sbx_policy *, const char *, sbx_error *);

static int add_paths(sbx_policy *p, const struct wire_strv *list, add_path_fn add, sbx_error *err)
{
	size_t i;
	int rc;

	for (i = 0; i < list->n; i++) {
		if ((rc = add(p, list->v[i], err)) < 0)
			return rc;
	}
	return 0;
}

/*
 * Applies the request's policy fields to |p|, a copy of the base policy.
 * Returns the field whose setter refused (its message is in |err|), or NULL.
 */
static const char *apply_policy(sbx_policy *p, const struct wire_policy *wp, sbx_error *err)
{
	if (has(wp, WIRE_P_WRITABLE)) {
		/* Named writable paths replace the base's; each must lie inside one. */
		sbx_policy_clear_writable(p);
		if (add_paths(p, &wp->writable, sbx_policy_add_writable, err) < 0)
			return "writable";
	}
	if (add_paths(p, &wp->deny_write, sbx_policy_add_deny_write, err) < 0)
		return "deny_write";
	if (add_paths(p, &wp->deny_read, sbx_policy_add_deny_read, err) < 0)
		return "deny_read";
	if (has(wp, WIRE_P_NETWORK) &&
	    sbx_policy_set_network(p, (enum sbx_network)wp->network, err) < 0)
		return "network";
	if (has(wp, WIRE_P_MEMORY_STRATEGY) &&
	    sbx_policy_set_memory_strategy(p, (enum sbx_memory_strategy)wp->memory_strategy, err) < 0)
		return "memory_strategy";
	if (has(wp, WIRE_P_MEMORY) && sbx_policy_set_memory(p, wp->memory, err) < 0)
		return "memory";
	if (has(wp, WIRE_P_FILE_SIZE) && sbx_policy_set_file_size(p, wp->file_size, err) < 0)
		return "file_size";
	if (has(wp, WIRE_P_CPUS) && sbx_policy_set_cpus(p, wp->cpus, err) < 0)
		return "cpus";
	if (has(wp, WIRE_P_CPU_SECONDS) && sbx_policy_set_cpu_seconds(p, wp->cpu_seconds, err) < 0)
		return "cpu_seconds";
	if (has(wp, WIRE_P_PROCESSES) && sbx_policy_set_processes(p, wp->processes, err) < 0)
		return "processes";
	if (has(wp, WIRE_P_OPEN_FILES) && sbx_policy_set_open_files(p, wp->open_files, err) < 0)
		return "open_files";
	return NULL;
}

/*
 * The request's own policy: the base policy with the request's fields on
 * top, which must narrow it.  The session checks that again when the run
 * starts; checking here answers a widening request before it waits in the
 * queue.
 */
static int build_policy(const struct server *srv, const struct wire_request *req,
                        sbx_policy **out, struct refusal *why)
{
	char prefix[64];
	const char *field;
	sbx_error err;
	sbx_policy *p;

	p = sbx_policy_copy(srv->cli.policy);
	if (!p)
		return refuse(why, WIRE_UNAVAILABLE, "", "the server is out of memory");
	field = apply_policy(p, &req->policy, &err);
	if (field) {
		snprintf(prefix, sizeof(prefix), "policy.%s: ", field);
		sbx_policy_free(p);
		return refuse(why, WIRE_BAD_REQUEST, prefix, err.message);
	}
	if (sbx_policy_check_narrows(srv->effective, p, &err) < 0) {
		sbx_policy_free(p);
		return refuse(why, err.code == -EPERM ? WIRE_POLICY_WIDENED : WIRE_BAD_REQUEST,
		              "policy.", err.message);
	}
	*out = p;
	return 0;
}

void serve_job_submit(struct server *srv, struct serve_conn *c, struct wire_request *req)
{
	struct refusal why;
	struct serve_job *job;
	sbx_policy *policy = NULL;
	char text[64];

	if (srv->stopping) {
		refuse(&why, WIRE_UNAVAILABLE, "", "the server is shutting down");
		goto refused;
	}
	if (serve_conn_has_id(c, req->id)) {
		snprintf(text, sizeof(text), "%llu is already in flight on this connection",
		         (unsigned long long)req->id);
		refuse(&why, WIRE_BAD_REQUEST, "id: ", text);
		goto refused;
	}
	if (check_limits(srv, req, &why) < 0 ||
	    (req->has_policy && build_policy(srv, req, &policy, &why) < 0))
		goto refused;
	job = calloc(1, sizeof(*job));
	if (!job) {
		refuse(&why, WIRE_UNAVAILABLE, "", "the server is out of memory");
		goto refused;
	}
	job->srv = srv;
	job->req = *req;
	memset(req, 0, sizeof(*req));
	job->policy = policy;
	job->reserve = serve_result_bound(job->req.has_max_output ? job->req.max_output
	                                                          : srv->cli.run.max_output);
	serve_conn_add_job(c, job);
	enqueue(srv, job);
	event_active(srv->pump, EV_READ, 0);
	return;
refused:
	serve_conn_send_error(c, &req->id, why.code, why.message);
	sbx_policy_free(policy);
	wire_request_free(req);
}

/* -------------------------------------------------------------- runs */

static void on_run_done(sbx_result *result, void *arg)
{
	struct serve_job *job = arg;
	struct server *srv = job->srv;
	struct serve_conn *c = job->conn;
	msgpack_sbuffer sb;
	char text[128];

	job->run = NULL;
	srv->running--;
	if (c) {
		msgpack_sbuffer_init(&sb);
		if (serve_pack_result(&sb, job->req.id, result) < 0) {
			serve_conn_send_error(c, &job->req.id, WIRE_UNAVAILABLE,
			                      "the server is out of memory for this result");
		} else if (sb.size > job->reserve) {
			/* Never expected: serve_result_bound() is wrong.  Sending it
			 * anyway would break the bound on the connection's memory. */
			snprintf(text, sizeof(text), "the result of %zu bytes is larger than the %zu "
			         "bytes the server reserved for it", sb.size, job->reserve);
			serve_conn_send_error(c, &job->req.id, WIRE_UNAVAILABLE, text);
		} else {
			serve_conn_send(c, &sb);
		}
		msgpack_sbuffer_destroy(&sb);
		serve_conn_job_done(c, job);
	}
	sbx_result_free(result);
	job_free(job);
	if (!srv->stopping)
		event_active(srv->pump, EV_READ, 0);
}

static const char *start_code(int rc)
{
	if (rc == -EPERM)
		return WIRE_POLICY_WIDENED;
	if (rc == SBX_ECLOSED)
		return WIRE_UNAVAILABLE;
	return WIRE_START_FAILED;
}

static void job_start(struct server *srv, struct serve_job *job)
{
	struct wire_request *req = &job->req;
	struct serve_conn *c = job->conn;
	sbx_run_options o;
	sbx_error err;
	uint64_t id;
	int rc;

	sbx_run_options_init(&o);
	o.argv = (const char *const *)req->argv.v;
	o.shell = req->shell;
	o.cwd = req->cwd;
	o.env = (const char *const *)req->env.v;
	o.stdin_data = req->stdin_data;
	o.stdin_len = req->stdin_len;
	o.timeout = req->has_timeout ? req->timeout : srv->cli.run.timeout;
	o.max_output = req->has_max_output ? (size_t)req->max_output : srv->cli.run.max_output;
	if (job->policy)
		rc = sbx_session_run_start_policy(srv->session, job->policy, &o, on_run_done, job,
		                                  &job->run, &err);
	else
		rc = sbx_session_run_start(srv->session, &o, on_run_done, job, &job->run, &err);
	if (rc < 0) {
		struct refusal why;

		refuse(&why, start_code(rc), rc == -EPERM ? "policy." : "", err.message);
		serve_conn_send_error(c, &req->id, why.code, why.message);
		serve_conn_job_done(c, job);
		job_free(job);
		return;
	}
	srv->running++;
	/* The run copied what it needs; only the id is kept, for the answer. */
	id = req->id;
	wire_request_free(req);
	req->id = id;
	sbx_policy_free(job->policy);
	job->policy = NULL;
}

void serve_pump(evutil_socket_t fd, short what, void *arg)
{
	struct server *srv = arg;
	struct serve_job *job;

	while (!srv->stopping && srv->running < srv->max_runs && srv->queue_head) {
		job = srv->queue_head;
		dequeue(srv, job);
		job_start(srv, job);
	}
}
