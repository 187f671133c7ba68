/*
 * check.c -- the message for a command that did not succeed.
 *
 * One block a person can read in a log: the command as it could be typed
 * into a shell, a colon, why it failed, and then the last lines of its
 * stderr, which is usually where the program said what went wrong.
 *
 *   sh -c 'make all': exited with status 2
 *   make: *** No rule to make target 'all'.  Stop.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"

#define SHOWN_MAX 256      /* bytes of the command shown */
#define TAIL_LINES 5
#define TAIL_MAX 2048      /* bytes of stderr shown */

struct text {
	char *buf;
	size_t len, size;
};

static void add(struct text *t, const char *s, size_t n)
{
	if (t->len + n >= t->size)
		n = t->size - t->len - 1;
	memcpy(t->buf + t->len, s, n);
	t->len += n;
	t->buf[t->len] = '\0';
}

static void adds(struct text *t, const char *s)
{
	add(t, s, strlen(s));
}

/* |word| as a shell would need it: bare when that is safe, else in single quotes. */
static void add_word(struct text *t, const char *word)
{
	bool bare = word[0] != '\0';
	for (const char *c = word; *c && bare; c++)
		bare = strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
		              "0123456789_@%+=:,./-", *c) != NULL;
	if (bare) {
		adds(t, word);
		return;
	}
	adds(t, "'");
	for (const char *c = word; *c; c++) {
		if (*c == '\'')
			adds(t, "'\\''");
		else
			add(t, c, 1);
	}
	adds(t, "'");
}

/* The command of |o|, cut at SHOWN_MAX bytes with "..." when longer. */
static void add_command(struct text *t, const sbx_run_options *o)
{
	char shown[SHOWN_MAX + 4];
	struct text c = {shown, 0, sizeof shown};
	if (o->shell) {
		adds(&c, "sh -c ");
		add_word(&c, o->shell);
	} else if (o->argv) {
		for (size_t i = 0; o->argv[i]; i++) {
			if (i)
				adds(&c, " ");
			add_word(&c, o->argv[i]);
		}
	}
	if (c.len >= SHOWN_MAX)
		memcpy(shown + SHOWN_MAX - 3, "...", 4);
	adds(t, shown);
}

/* "memory", "memory and cpu", "memory, cpu and processes": the limits hit, output aside. */
static unsigned add_limits(struct text *t, unsigned hit)
{
	hit &= ~(1u << SBX_HIT_OUTPUT);
	unsigned n = (unsigned)__builtin_popcount(hit), i = 0;
	for (int h = 0; h < SBX_HIT_COUNT; h++) {
		if (!(hit & (1u << h)))
			continue;
		if (i > 0)
			adds(t, i + 1 == n ? " and " : ", ");
		adds(t, sbx_hit_name((enum sbx_hit)h));
		i++;
	}
	return n;
}

static void add_status(struct text *t, const sbx_result *r)
{
	char s[64];
	if (r->exited)
		snprintf(s, sizeof s, "exit status %d", r->exit_code);
	else if (r->signal > 0)
		snprintf(s, sizeof s, "killed by signal %d, SIG%s", r->signal,
		         sigabbrev_np(r->signal) ? sigabbrev_np(r->signal) : "?");
	else
		snprintf(s, sizeof s, "no exit status");
	adds(t, s);
}

/* The last TAIL_LINES lines of the kept stderr, trailing blank space left off. */
static void add_tail(struct text *t, const sbx_output *err)
{
	size_t end = err->len;
	while (end > 0 && strchr(" \t\r\n", err->data[end - 1]))
		end--;
	if (end == 0)
		return;
	size_t start = end;
	unsigned lines = 0;
	while (start > 0 && end - start < TAIL_MAX) {
		if (err->data[start - 1] == '\n' && ++lines == TAIL_LINES)
			break;
		start--;
	}
	adds(t, "\n");
	add(t, err->data + start, end - start);
}

int sbx_result_check(const sbx_result *r, const sbx_run_options *o, sbx_error *err)
{
	if (!r)
		return sbx__error(err, -EINVAL, "sbx_result_check needs a result");
	if (r->exited && r->exit_code == 0 && !r->error && !r->timed_out && !r->cancelled)
		return 0;
	if (!err)
		return SBX_EFAILED;

	struct text t = {err->message, 0, sizeof err->message};
	err->code = SBX_EFAILED;
	err->message[0] = '\0';
	if (o)
		add_command(&t, o);
	else
		adds(&t, "the command");
	adds(&t, ": ");
	char s[128];
	if (r->error) {
		adds(&t, "could not start: ");
		adds(&t, r->start_errno ? strerrordesc_np(r->start_errno) : r->error);
	} else if (r->timed_out) {
		snprintf(s, sizeof s, "timed out after %g s", o ? o->timeout : r->resources.wall_seconds);
		adds(&t, s);
	} else if (r->cancelled) {
		adds(&t, "cancelled");
	} else if (r->resources.limits_hit & ~(1u << SBX_HIT_OUTPUT)) {
		adds(&t, "hit its ");
		adds(&t, add_limits(&t, r->resources.limits_hit) > 1 ? " limits (" : " limit (");
		add_status(&t, r);
		adds(&t, ")");
	} else if (r->exited) {
		snprintf(s, sizeof s, "exited with status %d", r->exit_code);
		adds(&t, s);
	} else {
		add_status(&t, r);
	}
	add_tail(&t, &r->out[SBX_STDERR]);
	return SBX_EFAILED;
}
