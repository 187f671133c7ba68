/*
 * sandbox.c -- a policy bound to a loop and a backend, and the runs in flight.
 *
 * Starting is paced.  A burst of sbx_run_start() calls spawns at most
 * max_starting children in one turn of the loop; the rest wait in a queue, in
 * order, and start on the following turns.  Spawning blocks the thread for
 * the length of an exec, so without the cap a burst of ten thousand starts
 * would hold up every timer and every output pipe on the loop until the last
 * one had been spawned.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "internal.h"
#include "watchdog.h"

#define DEFAULT_MAX_STARTING 32

void sbx_sandbox_options_init(sbx_sandbox_options *o)
{
	memset(o, 0, sizeof *o);
	o->backend = SBX_BACKEND_AUTO;
	o->max_starting = DEFAULT_MAX_STARTING;
}

static void on_admit(evutil_socket_t fd, short what, void *arg);

/* Picks the backend, or says why the one asked for cannot be had. */
static int pick_backend(const sbx_sandbox_options *o, const struct sbx__backend **out,
                        sbx_error *err)
{
	char why[SBX_ERROR_MAX - 256];
	switch (o->backend) {
	case SBX_BACKEND_AUTO:
		/* Linux has a backend, so auto never degrades to passthrough: a
		 * machine where bubblewrap cannot run is an error to fix. */
		if (sbx__bwrap_caps(why, sizeof why) < 0)
			return sbx__error(err, SBX_EUNAVAILABLE,
			                  "no sandbox backend can run here: %s; or choose the passthrough "
			                  "backend to run without isolation", why);
		*out = &sbx__backend_bwrap;
		return 0;
	case SBX_BACKEND_PASSTHROUGH:
		if (o->require_isolation)
			return sbx__error(err, SBX_ENOISOLATION,
			                  "isolation is required, but the passthrough backend isolates nothing");
		*out = &sbx__backend_passthrough;
		return 0;
	case SBX_BACKEND_BWRAP:
		*out = &sbx__backend_bwrap;
		return 0;
	case SBX_BACKEND_NATIVE:
		return sbx__error(err, SBX_EUNAVAILABLE,
		                  "the native backend is not built into this version of sbx yet");
	case SBX_BACKEND_LANDLOCK:
		return sbx__error(err, SBX_EUNAVAILABLE,
		                  "the landlock backend is not built into this version of sbx yet");
	}
	return sbx__error(err, -EINVAL, "backend %d is not one of auto, passthrough, bwrap, native, landlock",
	                  (int)o->backend);
}

int sbx_sandbox_new(struct event_base *base, const sbx_policy *policy,
                    const sbx_sandbox_options *options, sbx_sandbox **out, sbx_error *err)
{
	if (!base || !out)
		return sbx__error(err, -EINVAL, "sbx_sandbox_new needs an event_base and a place for the sandbox");
	sbx_sandbox_options opts;
	if (options)
		opts = *options;
	else
		sbx_sandbox_options_init(&opts);
	if (opts.max_starting == 0)
		return sbx__error(err, -EINVAL, "max_starting must be at least 1");

	const struct sbx__backend *backend;
	int rc = pick_backend(&opts, &backend, err);
	if (rc < 0)
		return rc;
	sbx_sandbox *sb = calloc(1, sizeof *sb);
	if (!sb)
		return sbx__error(err, -ENOMEM, "out of memory making a sandbox");
	sb->base = base;
	sb->opts = opts;
	sb->backend = backend;
	sb->devnull = -1;
	if (policy)
		rc = sbx__policy_copy(&sb->policy, policy);
	else
		rc = (sb->policy = sbx_policy_new()) ? 0 : -ENOMEM;
	if (rc == 0 && !(sb->scratch = malloc(SBX__SCRATCH_SIZE)))
		rc = -ENOMEM;
	if (rc == 0 && !(sb->ev_admit = event_new(base, -1, 0, on_admit, sb)))
		rc = -ENOMEM;
	if (rc < 0) {
		sbx__error(err, rc, "out of memory making a sandbox");
		goto fail;
	}
	sb->devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (sb->devnull < 0 || (rc = sbx__fd_move_high(&sb->devnull)) < 0) {
		rc = sb->devnull < 0 ? -errno : rc;
		sbx__error(err, rc, "could not open /dev/null: %s", sbx_strerror(rc));
		goto fail;
	}
	if (backend->open && (rc = backend->open(sb, err)) < 0)
		goto fail;
	/* Reading files only; and a supervisor killed earlier may have left
	 * run cgroups behind, which go at this process's first sandbox. */
	sbx__cg_probe(SBX__CGROUP_ROOT, "/proc/self/cgroup", &sb->cg_caps);
	static int reclaimed;
	if (!__atomic_exchange_n(&reclaimed, 1, __ATOMIC_RELAXED))
		sbx__cg_reclaim(&sb->cg_caps);
	if ((backend->describe && (rc = backend->describe(sb->policy, &sb->warnings)) < 0) ||
	    (rc = sbx__limits_plan(sb->policy, &sb->cg_caps, backend->own_processes, &sb->plan,
	                          &sb->warnings)) < 0) {
		sbx__error(err, rc, "out of memory describing the policy");
		goto fail;
	}
	*out = sb;
	return 0;

fail:
	sbx_sandbox_free(sb);
	return rc;
}

void sbx_sandbox_free(sbx_sandbox *sb)
{
	if (!sb)
		return;
	sb->closing = true;
	/* Each abandoned run unlinks itself and calls back, which may not start
	 * new runs (closing) but may cancel others: take the head each time. */
	while (sb->runs)
		sbx__run_abandon(sb->runs);
	if (sb->backend_state)
		sb->backend->close(sb);
	if (sb->watchdog)
		sbx__watchdog_free(sb->watchdog);
	sbx__cg_caps_free(&sb->cg_caps);
	if (sb->ev_admit)
		event_free(sb->ev_admit);
	if (sb->devnull >= 0)
		close(sb->devnull);
	free(sb->scratch);
	sbx__strv_free(&sb->warnings);
	sbx_policy_free(sb->policy);
	free(sb);
}

const char *sbx_sandbox_backend(const sbx_sandbox *sb)
{
	return sb->backend->name;
}

bool sbx_sandbox_isolated(const sbx_sandbox *sb)
{
	return sb->backend->isolated;
}

/* ------------------------------------------------------------ run lists */

void sbx__sandbox_link(sbx_sandbox *sb, sbx_run *run)
{
	run->prev = NULL;
	run->next = sb->runs;
	if (sb->runs)
		sb->runs->prev = run;
	sb->runs = run;
}

void sbx__sandbox_unlink(sbx_sandbox *sb, sbx_run *run)
{
	if (run->prev)
		run->prev->next = run->next;
	else
		sb->runs = run->next;
	if (run->next)
		run->next->prev = run->prev;
	run->prev = run->next = NULL;
}

void sbx__sandbox_enqueue(sbx_sandbox *sb, sbx_run *run)
{
	run->queue_next = NULL;
	if (sb->queue_tail)
		sb->queue_tail->queue_next = run;
	else
		sb->queue_head = run;
	sb->queue_tail = run;
}

void sbx__sandbox_dequeue(sbx_sandbox *sb, sbx_run *run)
{
	sbx_run **link = &sb->queue_head;
	sbx_run *prev = NULL;
	while (*link && *link != run) {
		prev = *link;
		link = &(*link)->queue_next;
	}
	if (!*link)
		return;
	*link = run->queue_next;
	if (sb->queue_tail == run)
		sb->queue_tail = prev;
	run->queue_next = NULL;
}

/* ------------------------------------------------------------ pacing */

bool sbx__sandbox_may_spawn(const sbx_sandbox *sb)
{
	return !sb->queue_head && sb->nstarting < sb->opts.max_starting;
}

void sbx__sandbox_spawned(sbx_sandbox *sb)
{
	/* The first spawn of a turn arms the admit event, which runs once the
	 * loop comes round and opens the slots again.  A zero timeout, not
	 * event_active(): libevent runs an event activated from inside its own
	 * callback again in the same pass, so a long queue would be admitted
	 * without the loop ever polling output, timers or exits in between. */
	if (sb->nstarting++ == 0) {
		static const struct timeval now = {0, 0};
		event_add(sb->ev_admit, &now);
	}
}

static void on_admit(evutil_socket_t fd, short what, void *arg)
{
	sbx_sandbox *sb = arg;
	sb->nstarting = 0;
	/* Admitting never calls a callback (failures finish on a later turn),
	 * so the sandbox stays valid throughout this loop. */
	while (sb->queue_head && sb->nstarting < sb->opts.max_starting) {
		sbx_run *run = sb->queue_head;
		sbx__sandbox_dequeue(sb, run);
		sbx__run_admit(run);
	}
}
