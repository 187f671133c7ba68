/*
 * testutil.h -- what the Check suites of libsbx share.
 *
 * Every test runs in its own process (Check's fork mode) under a fixture that
 * gives it a fresh event_base and, at teardown, asserts that the library left
 * nothing behind: no event registered on the base, no fd open that was not
 * open at setup, and no child of the test process unreaped.
 *
 * Helper children are this same test binary re-run as
 * "BINARY --helper MODE [ARG]"; main() hands such an invocation to
 * tu_init(), which runs the mode and exits before Check starts.  Modes:
 *
 *   fds                        prints its open fds, "0 1 2\n" when clean
 *   argv ARG...                prints each ARG NUL-terminated
 *   ignore-term [TOKEN]        ignores SIGTERM/INT/HUP, prints "ready\n", waits
 *   spin [TOKEN]               burns CPU forever
 *   write-forever [TOKEN]      writes to stdout forever
 *   close-stdout-and-sleep S   closes 1 and 2, sleeps S seconds, exits 5
 *   close-stdin-and-sleep S    closes 0, sleeps S seconds, exits 7
 *   session                    prints "pid sid pgid errno-of-opening-/dev/tty"
 *   sigstate                   prints the SigBlk and SigIgn lines of its status
 *   supervise DURATION [bwrap] runs "sleep DURATION" with libsbx and waits
 *   exit CODE                  exits CODE
 */
#ifndef SBX_TESTUTIL_H
#define SBX_TESTUTIL_H

#include <check.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sbx.h"

struct event_base;

/* Generous per-test timeout in seconds; CK_TIMEOUT_MULTIPLIER scales it. */
#define TU_TIMEOUT 30

/* ------------------------------------------------------------ start-up */

/* Runs a helper mode and exits if argv asks for one; otherwise remembers the
 * path of this binary for tu_helper() and returns. */
void tu_init(int argc, char **argv);

/* Runs every test of |s| and returns main()'s exit status. */
int tu_run_suite(Suite *s);

/* ------------------------------------------------------------- fixture */

/* The fixture's loop, fresh for every test. */
extern struct event_base *tu_base;

/* A TCase with the fixture and a timeout of |timeout| seconds. */
TCase *tu_tcase(const char *name, int timeout);

/*
 * Makes a sandbox on tu_base with the passthrough backend (|policy| NULL: an
 * empty policy; |max_starting| 0: the default), asserting that it works.  The
 * fixture frees it at teardown unless tu_sandbox_free() did so first.
 */
sbx_sandbox *tu_sandbox(const sbx_policy *policy, unsigned max_starting);
void tu_sandbox_free(void);

/* ------------------------------------------------------------------ runs */

/* Records the callbacks of one run. */
typedef struct tu_call {
	int calls;          /* how often the callback fired */
	sbx_result *result; /* the first result (the call owns it) */
	double started;     /* monotonic time sbx_run_start was called */
	double finished;    /* monotonic time of the first callback */
	sbx_run *run;       /* the handle; gone once calls > 0 */
} tu_call;

/* The sbx_run_cb that fills a tu_call. */
void tu_call_cb(sbx_result *result, void *arg);

/* Starts a run recorded in |c|, asserting that sbx_run_start returns 0 and
 * does not call the callback from inside itself. */
void tu_start(sbx_sandbox *sb, const sbx_run_options *o, tu_call *c);

/* Dispatches tu_base until |c|'s callback fired, then a little more, and
 * asserts it fired exactly once. */
void tu_wait(tu_call *c);

/* Start and wait; returns the result (freed by the fixture's tu_call_done()). */
sbx_result *tu_run(sbx_sandbox *sb, const sbx_run_options *o, tu_call *c);

/* The seconds between the start of |c| and its callback. */
double tu_call_wall(const tu_call *c);

/* Frees what |c| holds. */
void tu_call_done(tu_call *c);

/* Dispatches tu_base without blocking |rounds| times, sleeping 5 ms between. */
void tu_spin_loop(int rounds);

/* ------------------------------------------------------------- helpers */

/* Storage for the argv and env of one helper run. */
typedef struct tu_cmd {
	const char *argv[8];
	const char *env[4];
	char ld_path[4200];
} tu_cmd;

/* Points |o|->argv (and |o|->env) at a helper run of MODE with up to two
 * arguments (NULL when absent); |c| must live until sbx_run_start returns. */
void tu_helper(sbx_run_options *o, tu_cmd *c, const char *mode, const char *arg1,
               const char *arg2);

/* The path of the test binary. */
const char *tu_self(void);

/* ------------------------------------------------------------- the host */

/* Monotonic seconds. */
double tu_now(void);

/* A token unique to this test process, "BASE.PID": usable as a sleep
 * duration and findable in /proc with tu_find_proc(). */
void tu_token(char *buf, size_t size, const char *base);

/* The pid of a process (not this one) with an argv element equal to |token|,
 * or 0. */
int tu_find_proc(const char *token);

/* Like tu_find_proc(), but only a process running the program |prog| (its
 * comm): a sandbox wrapper that carries the token in its own arguments does
 * not count. */
int tu_find_prog(const char *token, const char *prog);

/* Polls /proc until no process has |token|; false if one still does after
 * |seconds|. */
bool tu_wait_gone(const char *token, double seconds);

/* Dispatches tu_base (without blocking) until a process with |token|
 * appears; returns its pid, failing the test after |seconds|. */
int tu_loop_until_proc(const char *token, double seconds);

/* SIGKILLs every process with |token|; returns how many there were. */
int tu_kill_token(const char *token);

/* Open fds of this process, excluding the one used to list them. */
typedef struct tu_fds {
	int n;
	int *fd;
	char **target;
} tu_fds;

void tu_fds_snapshot(tu_fds *s);
void tu_fds_free(tu_fds *s);
/* Fails the test, naming the first fd that differs, unless |now| is the same
 * set of fds as |before|. */
void tu_fds_assert_same(const tu_fds *before, const tu_fds *now, const char *where);
int tu_count_fds(void);

/* VmRSS of this process in KiB. */
long tu_rss_kib(void);

/* Sets the soft RLIMIT_NOFILE to the hard limit; returns the new soft limit. */
long tu_raise_nofile(void);

/* A directory made for this test (mkdtemp under /tmp) and removed at
 * teardown; files created in it are removed too. */
const char *tu_tmpdir(void);

/* Writes |len| bytes of |data| to a new file |name| in tu_tmpdir() with
 * |mode|; returns its path (static storage of the fixture, up to 8 files). */
const char *tu_write_file(const char *name, const void *data, size_t len, unsigned mode);

/* Whether this process runs under valgrind (which cannot follow a few of the
 * tests: a failed execve() kills its child, and an interrupted epoll_wait()
 * is restarted with its whole timeout). */
bool tu_under_valgrind(void);

/* True when |hay| contains |needle| (either may be NULL: false). */
bool tu_contains(const char *hay, const char *needle);

#endif
