/*
 * check_session.c -- sessions: the workspace and scratch space, closing with
 * runs in flight, removing what hostile programs leave, reclaiming what a
 * killed supervisor left, the blocking call and the messages of check.
 *
 * Runs as root and as an unprivileged user (tests/sandboxed.sh,
 * tests/unprivileged.sh), on passthrough and on bwrap where a test loops
 * over backends.  Every test points TMPDIR at a directory of its own, so the
 * session directories it counts are its own.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/capability.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <event2/event.h>

#include "testutil.h"

static const enum sbx_backend backends[] = {SBX_BACKEND_PASSTHROUGH, SBX_BACKEND_BWRAP};

/* ---------------------------------------------------------------- helpers */

static char test_tmp[128];

/* Runs when the test's process exits, passed or failed.  chmod first: a
 * test may leave a mode-000 directory behind when it fails. */
static void remove_test_tmp(void)
{
	char cmd[512];
	snprintf(cmd, sizeof cmd, "chmod -R u+rwx '%s' 2>/dev/null; rm -rf '%s'", test_tmp, test_tmp);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", test_tmp);
}

/* A fresh $TMPDIR for this test (one per test process), removed when the
 * process exits. */
static const char *fresh_tmpdir(void)
{
	if (test_tmp[0])
		return test_tmp;
	/* Under the scripts' own directory when they give one (they remove it
	 * whatever a failed test left), else /tmp. */
	const char *base = getenv("SBX_TEST_TMPDIR");
	snprintf(test_tmp, sizeof test_tmp, "%s/sbx-session-test.XXXXXX",
	         base && base[0] == '/' ? base : "/tmp");
	ck_assert_ptr_nonnull(mkdtemp(test_tmp));
	chmod(test_tmp, 0755);
	setenv("TMPDIR", test_tmp, 1);
	atexit(remove_test_tmp);
	return test_tmp;
}

/* Entries of |dir| other than "." and "..". */
static int count_entries(const char *dir)
{
	DIR *d = opendir(dir);
	int n = 0;
	ck_assert_msg(d != NULL, "opendir %s: %s", dir, strerror(errno));
	for (struct dirent *e; (e = readdir(d));)
		n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
	closedir(d);
	return n;
}

static bool exists(const char *path)
{
	struct stat st;
	return lstat(path, &st) == 0;
}

static sbx_session *open_on(struct event_base *base, enum sbx_backend backend,
                            const char *workspace, const sbx_policy *policy)
{
	sbx_session_options so;
	sbx_session_options_init(&so);
	so.sandbox.backend = backend;
	so.workspace = workspace;
	sbx_session *s = NULL;
	sbx_error err;
	int rc = sbx_session_open(base, policy, &so, &s, &err);
	ck_assert_msg(rc == 0, "sbx_session_open: %s", err.message);
	return s;
}

static sbx_session *open_session(enum sbx_backend backend, const char *workspace)
{
	return open_on(tu_base, backend, workspace, NULL);
}

/* Runs |line| with the blocking call; the caller frees the result. */
static sbx_result *run_sync(sbx_session *s, const char *line)
{
	sbx_run_options o;
	sbx_run_options_init(&o);
	o.shell = line;
	o.timeout = 20;
	sbx_result *r = NULL;
	sbx_error err;
	int rc = sbx_session_run(s, &o, false, &r, &err);
	ck_assert_msg(rc == 0, "sbx_session_run: %s", err.message);
	ck_assert_msg(r->error == NULL, "could not start: %s", r->error);
	return r;
}

static void close_ok(sbx_session *s)
{
	sbx_error err;
	int rc = sbx_session_close(s, &err);
	ck_assert_msg(rc == 0, "sbx_session_close: %s", err.message);
}

/* ------------------------------------------------------------- workspace */

START_TEST(private_workspace_is_removed)
{
	const char *tmp = fresh_tmpdir();
	sbx_session *s = open_session(backends[_i], NULL);
	char ws[PATH_MAX], file[PATH_MAX + 8];
	snprintf(ws, sizeof ws, "%s", sbx_session_workspace(s));
	ck_assert_msg(strncmp(ws, tmp, strlen(tmp)) == 0, "workspace %s is not under %s", ws, tmp);
	ck_assert_int_eq(count_entries(tmp), 1);

	sbx_result *r = run_sync(s, "echo made > file && pwd");
	ck_assert_int_eq(r->exit_code, 0);
	ck_assert_str_eq(r->out[SBX_STDOUT].data, strcat(strcpy(file, ws), "\n"));
	snprintf(file, sizeof file, "%s/file", ws);
	ck_assert(exists(file));
	sbx_result_free(r);

	close_ok(s);
	ck_assert(!exists(ws));
	ck_assert_int_eq(count_entries(tmp), 0);
	sbx_session_free(s);
}
END_TEST

START_TEST(supplied_workspace_is_kept)
{
	const char *tmp = fresh_tmpdir();
	char ws[PATH_MAX], file[PATH_MAX + 8];
	snprintf(ws, sizeof ws, "%s/mine", tmp);
	ck_assert_int_eq(mkdir(ws, 0755), 0);
	sbx_session *s = open_session(backends[_i], ws);
	ck_assert_str_eq(sbx_session_workspace(s), ws);

	sbx_result *r = run_sync(s, "echo made > file && mkdir -p sub/deeper && chmod 500 sub");
	ck_assert_int_eq(r->exit_code, 0);
	sbx_result_free(r);
	close_ok(s);
	sbx_session_free(s);

	/* Exactly as the command left it, and only the session's own directory gone. */
	snprintf(file, sizeof file, "%s/file", ws);
	ck_assert(exists(file));
	snprintf(file, sizeof file, "%s/sub", ws);
	struct stat st;
	ck_assert_int_eq(stat(file, &st), 0);
	ck_assert_int_eq(st.st_mode & 07777, 0500);
	ck_assert_int_eq(count_entries(tmp), 1);
}
END_TEST

START_TEST(cwd_is_relative_to_the_workspace)
{
	fresh_tmpdir();
	sbx_session *s = open_session(SBX_BACKEND_PASSTHROUGH, NULL);
	char sub[PATH_MAX], want[PATH_MAX + 2];
	snprintf(sub, sizeof sub, "%s/a/b", sbx_session_workspace(s));
	sbx_result *r = run_sync(s, "mkdir -p a/b");
	sbx_result_free(r);

	sbx_run_options o;
	sbx_run_options_init(&o);
	o.shell = "pwd";
	o.cwd = "a/b";
	sbx_error err;
	ck_assert_int_eq(sbx_session_run(s, &o, true, &r, &err), 0);
	snprintf(want, sizeof want, "%s\n", sub);
	ck_assert_str_eq(r->out[SBX_STDOUT].data, want);
	sbx_result_free(r);

	o.cwd = "/";
	ck_assert_int_eq(sbx_session_run(s, &o, true, &r, &err), 0);
	ck_assert_str_eq(r->out[SBX_STDOUT].data, "/\n");
	sbx_result_free(r);

	o.cwd = "";
	ck_assert_int_eq(sbx_session_run(s, &o, false, &r, &err), -EINVAL);
	ck_assert_ptr_null(r);
	ck_assert(tu_contains(err.message, "cwd is empty"));
	o.cwd = "a/../..";
	ck_assert_int_eq(sbx_session_run(s, &o, false, &r, &err), -EINVAL);
	ck_assert_str_eq(err.message, "cwd 'a/../..' climbs out of the workspace with '..'; "
	                 "give an absolute path for a directory elsewhere");
	o.cwd = "a/..b";   /* a name that starts with two dots is just a name */
	ck_assert_int_eq(sbx_session_run(s, &o, false, &r, &err), 0);
	ck_assert(r->error != NULL);   /* it does not exist: could not change to it */
	sbx_result_free(r);
	sbx_session_free(s);
}
END_TEST

START_TEST(tmpdir_is_the_scratch_space)
{
	fresh_tmpdir();
	sbx_session *s = open_session(backends[_i], NULL);
	char want[PATH_MAX + 16];
	sbx_result *r = run_sync(s, "echo \"$TMPDIR\"; echo scratch > \"$TMPDIR/f\" && cat \"$TMPDIR/f\"");
	ck_assert_int_eq(r->exit_code, 0);
	snprintf(want, sizeof want, "%s\nscratch\n", sbx_session_scratch(s));
	ck_assert_str_eq(r->out[SBX_STDOUT].data, want);
	/* Private to the session: inside its own directory, not the workspace. */
	ck_assert(strncmp(sbx_session_scratch(s), sbx_session_workspace(s),
	                  strlen(sbx_session_workspace(s))) != 0);
	sbx_result_free(r);
	sbx_session_free(s);
}
END_TEST

/* ----------------------------------------------------------------- close */

START_TEST(close_ends_runs_in_flight)
{
	const char *tmp = fresh_tmpdir();
	sbx_session *s = open_session(backends[_i], NULL);
	char ignore[64], detach[64], parent[64], endless[64], line[512];
	tu_token(ignore, sizeof ignore, "101");
	tu_token(detach, sizeof detach, "102");
	tu_token(parent, sizeof parent, "104");
	tu_token(endless, sizeof endless, "103");

	tu_call calls[3] = {0};
	tu_cmd cmd;
	sbx_run_options o;
	sbx_error err;

	/* One ignores SIGTERM. */
	sbx_run_options_init(&o);
	o.timeout = 0;
	tu_helper(&o, &cmd, "ignore-term", ignore, NULL);
	ck_assert_int_eq(sbx_session_run_start(s, &o, tu_call_cb, &calls[0], &calls[0].run, &err), 0);
	/* One puts a grandchild in a session of its own. */
	sbx_run_options_init(&o);
	o.timeout = 0;
	snprintf(line, sizeof line, "setsid sleep %s & exec sleep %s", detach, parent);
	o.shell = line;
	ck_assert_int_eq(sbx_session_run_start(s, &o, tu_call_cb, &calls[1], &calls[1].run, &err), 0);
	/* One writes without end. */
	sbx_run_options_init(&o);
	o.timeout = 0;
	o.max_output = 4096;
	tu_helper(&o, &cmd, "write-forever", endless, NULL);
	ck_assert_int_eq(sbx_session_run_start(s, &o, tu_call_cb, &calls[2], &calls[2].run, &err), 0);

	tu_loop_until_proc(ignore, 20);
	tu_loop_until_proc(endless, 20);
	tu_loop_until_proc(detach, 20);   /* the grandchild, in a session of its own */
	tu_loop_until_proc(parent, 20);
	for (int i = 0; i < 3; i++)
		ck_assert_int_eq(calls[i].calls, 0);
	char ws[PATH_MAX];
	snprintf(ws, sizeof ws, "%s", sbx_session_workspace(s));

	close_ok(s);
	for (int i = 0; i < 3; i++) {
		ck_assert_msg(calls[i].calls == 1, "run %d called back %d times", i, calls[i].calls);
		ck_assert(calls[i].result->cancelled);
	}
	/* Nothing left: no process, no directory. */
	ck_assert_msg(tu_wait_gone(ignore, 2), "the SIGTERM-ignoring run survived");
	ck_assert_msg(tu_wait_gone(detach, 2), "the setsid grandchild survived");
	ck_assert_msg(tu_wait_gone(parent, 2), "the grandchild's parent survived");
	ck_assert_msg(tu_wait_gone(endless, 2), "the writer survived");
	ck_assert(!exists(ws));
	ck_assert_int_eq(count_entries(tmp), 0);
	/* Closing again is harmless, and the callbacks stay at one. */
	close_ok(s);
	sbx_session_free(s);
	for (int i = 0; i < 3; i++) {
		ck_assert_int_eq(calls[i].calls, 1);
		tu_call_done(&calls[i]);
	}
}
END_TEST

START_TEST(closed_session_refuses_work)
{
	fresh_tmpdir();
	sbx_session *s = open_session(SBX_BACKEND_PASSTHROUGH, NULL);
	close_ok(s);
	close_ok(s);
	ck_assert_ptr_null(sbx_session_sandbox(s));

	sbx_run_options o;
	sbx_run_options_init(&o);
	o.shell = "true";
	sbx_error err;
	sbx_result *r = (sbx_result *)1;
	ck_assert_int_eq(sbx_session_run(s, &o, false, &r, &err), SBX_ECLOSED);
	ck_assert_ptr_null(r);
	ck_assert_str_eq(err.message, "the session is closed; open a new one");
	tu_call c = {0};
	ck_assert_int_eq(sbx_session_run_start(s, &o, tu_call_cb, &c, NULL, &err), SBX_ECLOSED);
	ck_assert_int_eq(c.calls, 0);
	sbx_session_free(s);
}
END_TEST

/* A session that fails to open owns nothing afterwards. */
START_TEST(failed_open_leaves_nothing)
{
	const char *tmp = fresh_tmpdir();
	sbx_session_options so;
	sbx_session_options_init(&so);
	so.sandbox.backend = SBX_BACKEND_PASSTHROUGH;
	so.workspace = "/nonexistent/sbx-workspace";
	sbx_session *s = (sbx_session *)1;
	sbx_error err;
	ck_assert_int_eq(sbx_session_open(tu_base, NULL, &so, &s, &err), -ENOENT);
	ck_assert_ptr_null(s);
	ck_assert_str_eq(err.message,
	                 "workspace '/nonexistent/sbx-workspace': No such file or directory");
	ck_assert_int_eq(count_entries(tmp), 0);

	/* Failing late, in making the sandbox, takes back the directories too. */
	so.workspace = NULL;
	so.sandbox.backend = SBX_BACKEND_NATIVE;
	ck_assert_int_eq(sbx_session_open(tu_base, NULL, &so, &s, &err), SBX_EUNAVAILABLE);
	ck_assert_int_eq(count_entries(tmp), 0);

	/* And with a loop of its own. */
	ck_assert_int_eq(sbx_session_open(NULL, NULL, &so, &s, &err), SBX_EUNAVAILABLE);
	ck_assert_int_eq(count_entries(tmp), 0);
}
END_TEST

/* ------------------------------------------------------------- cleanup */

/* Drops the capabilities that let root ignore file modes, so that a mode-000
 * directory stops root as it stops anyone. */
static void drop_dac_override(void)
{
	if (geteuid() != 0)
		return;
	struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
	struct __user_cap_data_struct d[2];
	ck_assert_int_eq(syscall(SYS_capget, &h, d), 0);
	for (int i = 0; i < 2; i++) {
		unsigned drop = 0;
		for (int cap = 0; cap < 64; cap++) {
			if (cap / 32 == i && (cap == CAP_DAC_OVERRIDE || cap == CAP_DAC_READ_SEARCH ||
			                      cap == CAP_FOWNER))
				drop |= 1u << (cap % 32);
		}
		d[i].effective &= ~drop;
	}
	ck_assert_int_eq(syscall(SYS_capset, &h, d), 0);
}

/* Builds a chain of |depth| directories "d" under |dirfd|, one open at a time. */
static void make_chain(int dirfd, int depth)
{
	int fd = dup(dirfd);
	for (int i = 0; i < depth; i++) {
		ck_assert_int_eq(mkdirat(fd, "d", 0700), 0);
		int next = openat(fd, "d", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		ck_assert_int_ge(next, 0);
		close(fd);
		fd = next;
	}
	/* The bottom holds a file and is left unwritable. */
	int f = openat(fd, "bottom", O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
	ck_assert_int_ge(f, 0);
	close(f);
	ck_assert_int_eq(fchmod(fd, 0500), 0);
	close(fd);
}

START_TEST(cleanup_removes_a_hostile_tree)
{
	const char *tmp = fresh_tmpdir();
	char outside[PATH_MAX], sentinel[PATH_MAX + 16], path[PATH_MAX + 32];
	snprintf(outside, sizeof outside, "%s/outside", tmp);
	ck_assert_int_eq(mkdir(outside, 0755), 0);
	snprintf(sentinel, sizeof sentinel, "%s/keep", outside);
	int fd = open(sentinel, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	ck_assert_int_ge(fd, 0);
	close(fd);

	drop_dac_override();
	sbx_session *s = open_session(SBX_BACKEND_PASSTHROUGH, NULL);
	const char *ws = sbx_session_workspace(s);
	/* What a program could leave: a locked directory with contents, a
	 * read-only one, links to / and to a directory outside, a FIFO, a
	 * socket, and a chain 2000 deep. */
	char line[PATH_MAX + 512];
	snprintf(line, sizeof line,
	         "mkdir -p locked/inner && echo x > locked/inner/f && chmod 000 locked && "
	         "mkdir ro && echo y > ro/f && chmod 500 ro && "
	         "ln -s / root && ln -s '%s' out && mkfifo fifo && chmod 000 \"$TMPDIR\"",
	         outside);
	sbx_result *r = run_sync(s, line);
	ck_assert_int_eq(r->exit_code, 0);
	sbx_result_free(r);
	r = NULL;
	int sock = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	snprintf(sa.sun_path, sizeof sa.sun_path, "%s/sock", ws);
	ck_assert_int_eq(bind(sock, (struct sockaddr *)&sa, sizeof sa), 0);
	close(sock);
	int wsfd = open(ws, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	make_chain(wsfd, 2000);
	close(wsfd);
	snprintf(path, sizeof path, "%s/locked", ws);
	ck_assert_int_eq(open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC), -1);
	ck_assert_int_eq(errno, EACCES);

	close_ok(s);
	sbx_session_free(s);
	ck_assert_int_eq(count_entries(tmp), 1);      /* only "outside" */
	ck_assert_msg(exists(sentinel), "a link was followed: %s is gone", sentinel);
	ck_assert(exists("/etc/passwd"));
}
END_TEST

/* Root only: a mount inside the tree is not entered and stays, named in the error. */
START_TEST(cleanup_does_not_cross_mounts)
{
	if (geteuid() != 0)
		return;
	const char *tmp = fresh_tmpdir();
	/* A mount namespace of this test's own, so the host never sees the mount. */
	ck_assert_int_eq(unshare(CLONE_NEWNS), 0);
	ck_assert_int_eq(mount("none", "/", "none", MS_REC | MS_PRIVATE, NULL), 0);
	sbx_session *s = open_session(SBX_BACKEND_PASSTHROUGH, NULL);
	char mnt[PATH_MAX], file[PATH_MAX + 16];
	snprintf(mnt, sizeof mnt, "%s/mnt", sbx_session_workspace(s));
	ck_assert_int_eq(mkdir(mnt, 0755), 0);
	ck_assert_int_eq(mount("tmpfs", mnt, "tmpfs", 0, "size=1m"), 0);
	snprintf(file, sizeof file, "%s/on-the-mount", mnt);
	int fd = open(file, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	ck_assert_int_ge(fd, 0);
	close(fd);

	sbx_error err;
	ck_assert_int_eq(sbx_session_close(s, &err), -EXDEV);
	ck_assert_msg(tu_contains(err.message, mnt), "error does not name the mount: %s", err.message);
	ck_assert(exists(file));
	ck_assert_int_eq(umount(mnt), 0);
	sbx_session_free(s);
	(void)tmp;
}
END_TEST

/* ------------------------------------------------------------ reclaiming */

/* A child that opens a session with a run in flight, says where it lives, and waits to be killed. */
static pid_t doomed_supervisor(char *root, size_t size)
{
	int p[2];
	ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		struct event_base *base = event_base_new();
		sbx_session_options so;
		sbx_session_options_init(&so);
		so.sandbox.backend = SBX_BACKEND_PASSTHROUGH;
		sbx_session *s;
		sbx_run_options o;
		sbx_run_options_init(&o);
		o.shell = "echo data > file; exec sleep 1000";
		if (sbx_session_open(base, NULL, &so, &s, NULL) < 0 ||
		    sbx_session_run_start(s, &o, tu_call_cb, NULL, NULL, NULL) < 0)
			_exit(1);
		event_base_loop(base, EVLOOP_NONBLOCK);
		dprintf(p[1], "%s\n", sbx_session_workspace(s));
		for (;;)
			pause();
	}
	close(p[1]);
	ssize_t n = read(p[0], root, size - 1);
	close(p[0]);
	ck_assert_int_gt(n, 1);
	root[n - 1] = '\0';
	/* The workspace is ROOT/workspace; the session's directory is ROOT. */
	*strrchr(root, '/') = '\0';
	return pid;
}

START_TEST(killed_supervisor_is_reclaimed)
{
	const char *tmp = fresh_tmpdir();
	char dead[PATH_MAX], live[PATH_MAX], fake[PATH_MAX], other[PATH_MAX];
	pid_t victim = doomed_supervisor(dead, sizeof dead);
	pid_t survivor = doomed_supervisor(live, sizeof live);
	/* A directory of our kind named after a live process (this one), and one not of our kind. */
	snprintf(fake, sizeof fake, "%s/sbx-%d-abcdef", tmp, (int)getpid());
	ck_assert_int_eq(mkdir(fake, 0700), 0);
	snprintf(other, sizeof other, "%s/sbx-keep-me", tmp);
	ck_assert_int_eq(mkdir(other, 0700), 0);

	kill(victim, SIGKILL);
	ck_assert_int_eq(waitpid(victim, NULL, 0), victim);
	ck_assert_msg(exists(dead), "the killed supervisor's directory is already gone");

	sbx_session *s = open_session(SBX_BACKEND_PASSTHROUGH, NULL);
	ck_assert_msg(!exists(dead), "%s was not reclaimed", dead);
	ck_assert_msg(exists(live), "a live session's directory was taken");
	ck_assert(exists(fake));
	ck_assert(exists(other));
	sbx_session_free(s);

	kill(survivor, SIGKILL);
	ck_assert_int_eq(waitpid(survivor, NULL, 0), survivor);
}
END_TEST

/* ------------------------------------------------------------- blocking */

START_TEST(blocking_call_needs_no_loop)
{
	fresh_tmpdir();
	sbx_session *s = open_on(NULL, SBX_BACKEND_BWRAP, NULL, NULL);
	sbx_result *r = run_sync(s, "echo from a loop of its own");
	ck_assert_str_eq(r->out[SBX_STDOUT].data, "from a loop of its own\n");
	ck_assert(r->isolated);
	sbx_result_free(r);
	r = run_sync(s, "exit 4");
	ck_assert_int_eq(r->exit_code, 4);
	sbx_result_free(r);
	sbx_session_free(s);
}
END_TEST

struct nested {
	sbx_session *s;
	int rc;
	sbx_error err;
	sbx_result *inner;
};

static void on_outer_done(sbx_result *r, void *arg)
{
	struct nested *n = arg;
	sbx_run_options o;
	sbx_run_options_init(&o);
	o.shell = "true";
	n->rc = sbx_session_run(n->s, &o, false, &n->inner, &n->err);
	sbx_result_free(r);
}

START_TEST(blocking_call_from_a_callback_is_refused)
{
	fresh_tmpdir();
	struct nested n = {.s = open_session(SBX_BACKEND_PASSTHROUGH, NULL), .rc = 1};
	sbx_run_options o;
	sbx_run_options_init(&o);
	o.shell = "true";
	ck_assert_int_eq(sbx_session_run_start(n.s, &o, on_outer_done, &n, NULL, NULL), 0);
	while (n.rc == 1)
		event_base_loop(tu_base, EVLOOP_ONCE);
	ck_assert_int_eq(n.rc, SBX_ESTATE);
	ck_assert_ptr_null(n.inner);
	ck_assert(tu_contains(n.err.message, "inside a callback"));
	sbx_session_free(n.s);
}
END_TEST

/* ------------------------------------------------------- per-run policy */

START_TEST(per_run_policy_may_only_narrow)
{
	const char *tmp = fresh_tmpdir();
	sbx_policy *base = sbx_policy_new();
	ck_assert_int_eq(sbx_policy_set_memory(base, 256 << 20, NULL), 0);
	sbx_session *s = open_on(tu_base, SBX_BACKEND_BWRAP, NULL, base);

	sbx_run_options o;
	sbx_run_options_init(&o);
	o.shell = "echo narrowed > file && cat file";
	sbx_error err;
	tu_call c = {0};

	/* Lower memory, network none: allowed, and the workspace stays writable. */
	sbx_policy *p = sbx_policy_copy(base);
	ck_assert_int_eq(sbx_policy_set_memory(p, 128 << 20, NULL), 0);
	ck_assert_int_eq(sbx_session_run_start_policy(s, p, &o, tu_call_cb, &c, NULL, &err), 0);
	tu_wait(&c);
	ck_assert_str_eq(c.result->out[SBX_STDOUT].data, "narrowed\n");
	tu_call_done(&c);

	/* Each widening is refused, naming the field, and nothing starts. */
	memset(&c, 0, sizeof c);
	ck_assert_int_eq(sbx_policy_set_memory(p, 512 << 20, NULL), 0);
	ck_assert_int_eq(sbx_session_run_start_policy(s, p, &o, tu_call_cb, &c, NULL, &err), -EPERM);
	ck_assert_str_eq(err.message, "memory: 536870912 is above the base policy's 268435456");
	sbx_policy_free(p);

	p = sbx_policy_copy(base);
	ck_assert_int_eq(sbx_policy_add_writable(p, tmp, NULL), 0);
	ck_assert_int_eq(sbx_session_run_start_policy(s, p, &o, tu_call_cb, &c, NULL, &err), -EPERM);
	ck_assert(strncmp(err.message, "writable: ", 10) == 0);
	sbx_policy_free(p);

	p = sbx_policy_copy(base);
	ck_assert_int_eq(sbx_policy_set_network(p, SBX_NETWORK_FULL, NULL), 0);
	ck_assert_int_eq(sbx_session_run_start_policy(s, p, &o, tu_call_cb, &c, NULL, &err), -EPERM);
	ck_assert(strncmp(err.message, "network: ", 9) == 0);
	sbx_policy_free(p);
	ck_assert_int_eq(c.calls, 0);

	sbx_policy_free(base);
	sbx_session_free(s);
}
END_TEST

/* ---------------------------------------------------------------- check */

/* The check message of one blocking run of |o| in a passthrough session. */
static const char *check_message(sbx_run_options *o, const sbx_policy *policy)
{
	static sbx_error err;
	fresh_tmpdir();
	sbx_session *s = open_on(tu_base, SBX_BACKEND_PASSTHROUGH, NULL, policy);
	sbx_result *r = NULL;
	int rc = sbx_session_run(s, o, true, &r, &err);
	ck_assert_msg(rc == SBX_EFAILED, "check returned %d: %s", rc, err.message);
	ck_assert_int_eq(err.code, SBX_EFAILED);
	ck_assert_ptr_nonnull(r);     /* the whole result is still there */
	sbx_result_free(r);
	sbx_session_free(s);
	return err.message;
}

START_TEST(check_message_exit_status)
{
	sbx_run_options o;
	sbx_run_options_init(&o);
	const char *argv[] = {"sh", "-c", "echo one >&2; echo two >&2; exit 3", NULL};
	o.argv = argv;
	ck_assert_str_eq(check_message(&o, NULL),
	                 "sh -c 'echo one >&2; echo two >&2; exit 3': exited with status 3\n"
	                 "one\n"
	                 "two");
}
END_TEST

START_TEST(check_message_keeps_the_last_five_lines)
{
	sbx_run_options o;
	sbx_run_options_init(&o);
	o.shell = "for i in 1 2 3 4 5 6 7; do echo line $i >&2; done; exit 1";
	ck_assert_str_eq(check_message(&o, NULL),
	                 "sh -c 'for i in 1 2 3 4 5 6 7; do echo line $i >&2; done; exit 1': "
	                 "exited with status 1\n"
	                 "line 3\nline 4\nline 5\nline 6\nline 7");
}
END_TEST

START_TEST(check_message_timeout)
{
	sbx_run_options o;
	sbx_run_options_init(&o);
	o.shell = "echo waiting >&2; exec sleep 30";
	o.timeout = 0.5;
	ck_assert_str_eq(check_message(&o, NULL),
	                 "sh -c 'echo waiting >&2; exec sleep 30': timed out after 0.5 s\n"
	                 "waiting");
}
END_TEST

START_TEST(check_message_memory_limit)
{
	/* The watchdog's verdict is the same for root and anyone else. */
	sbx_policy *p = sbx_policy_new();
	ck_assert_int_eq(sbx_policy_set_memory(p, 32 << 20, NULL), 0);
	ck_assert_int_eq(sbx_policy_set_memory_strategy(p, SBX_MEMORY_WATCHDOG, NULL), 0);
	sbx_run_options o;
	sbx_run_options_init(&o);
	const char *argv[] = {"tail", "/dev/zero", NULL};
	o.argv = argv;
	ck_assert_str_eq(check_message(&o, p),
	                 "tail /dev/zero: hit its memory limit (killed by signal 9, SIGKILL)");
	sbx_policy_free(p);
}
END_TEST

START_TEST(check_message_could_not_start)
{
	sbx_run_options o;
	sbx_run_options_init(&o);
	const char *argv[] = {"/nonexistent/program", "an arg", NULL};
	o.argv = argv;
	ck_assert_str_eq(check_message(&o, NULL),
	                 "/nonexistent/program 'an arg': could not start: No such file or directory");
	const char *dir[] = {"/", NULL};
	o.argv = dir;
	ck_assert_str_eq(check_message(&o, NULL), "/: could not start: Permission denied");
}
END_TEST

START_TEST(check_message_signal)
{
	sbx_run_options o;
	sbx_run_options_init(&o);
	o.shell = "echo \"it's over\" >&2; kill -TERM $$";
	ck_assert_str_eq(check_message(&o, NULL),
	                 "sh -c 'echo \"it'\\''s over\" >&2; kill -TERM $$': killed by signal 15, SIGTERM\n"
	                 "it's over");
}
END_TEST

START_TEST(check_passes_success)
{
	fresh_tmpdir();
	sbx_session *s = open_session(SBX_BACKEND_PASSTHROUGH, NULL);
	sbx_run_options o;
	sbx_run_options_init(&o);
	o.shell = "echo fine; echo noise >&2";
	sbx_result *r;
	sbx_error err;
	ck_assert_int_eq(sbx_session_run(s, &o, true, &r, &err), 0);
	ck_assert_int_eq(sbx_result_check(r, &o, &err), 0);
	sbx_result_free(r);
	sbx_session_free(s);
}
END_TEST

/* ----------------------------------------------------------------- suite */

static Suite *session_suite(void)
{
	Suite *s = suite_create("session");
	TCase *tc = tu_tcase("workspace", TU_TIMEOUT);
	tcase_add_loop_test(tc, private_workspace_is_removed, 0, 2);
	tcase_add_loop_test(tc, supplied_workspace_is_kept, 0, 2);
	tcase_add_test(tc, cwd_is_relative_to_the_workspace);
	tcase_add_loop_test(tc, tmpdir_is_the_scratch_space, 0, 2);
	suite_add_tcase(s, tc);

	tc = tu_tcase("close", TU_TIMEOUT);
	tcase_add_loop_test(tc, close_ends_runs_in_flight, 0, 2);
	tcase_add_test(tc, closed_session_refuses_work);
	tcase_add_test(tc, failed_open_leaves_nothing);
	tcase_add_test(tc, cleanup_removes_a_hostile_tree);
	tcase_add_test(tc, cleanup_does_not_cross_mounts);
	tcase_add_test(tc, killed_supervisor_is_reclaimed);
	suite_add_tcase(s, tc);

	tc = tu_tcase("blocking", TU_TIMEOUT);
	tcase_add_test(tc, blocking_call_needs_no_loop);
	tcase_add_test(tc, blocking_call_from_a_callback_is_refused);
	tcase_add_test(tc, per_run_policy_may_only_narrow);
	tcase_add_test(tc, check_message_exit_status);
	tcase_add_test(tc, check_message_keeps_the_last_five_lines);
	tcase_add_test(tc, check_message_timeout);
	tcase_add_test(tc, check_message_memory_limit);
	tcase_add_test(tc, check_message_could_not_start);
	tcase_add_test(tc, check_message_signal);
	tcase_add_test(tc, check_passes_success);
	suite_add_tcase(s, tc);
	return s;
}

int main(int argc, char **argv)
{
	tu_init(argc, argv);
	return tu_run_suite(session_suite());
}
