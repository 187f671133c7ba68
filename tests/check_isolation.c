/*
 * check_isolation.c -- THREATS.md's escape table against the isolating
 * backends (today: bubblewrap).
 *
 * Every test runs a real sandboxed process and asserts on what the kernel
 * let it do, and on the host afterwards.  The suite runs as root and, through
 * tests/unprivileged.sh, again as an unprivileged user made for the purpose.
 *
 * Files the sandbox must see but not write live under /var/tmp: /tmp is a
 * private tmpfs inside the sandbox, so a host file there would be invisible
 * rather than read-only, and a test of "cannot write" would pass for the
 * wrong reason.
 */
#include "testutil.h"

#include <errno.h>
#include <sched.h>
#include <stddef.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <netinet/in.h>
#include <termios.h>
#include <unistd.h>

#include <event2/event.h>

/* ------------------------------------------------------------ probes */

/*
 * "probe WHAT ARG...": runs inside the sandbox and prints "WHAT=RESULT",
 * where RESULT is "ok" or the errno name of the refusal.
 */
static const char *errname(int e)
{
	switch (e) {
	case 0: return "ok";
	case EPERM: return "EPERM";
	case ENOENT: return "ENOENT";
	case ESRCH: return "ESRCH";
	case EACCES: return "EACCES";
	case EROFS: return "EROFS";
	case EXDEV: return "EXDEV";
	case ENOTTY: return "ENOTTY";
	case ENXIO: return "ENXIO";
	case EIO: return "EIO";
	case EINVAL: return "EINVAL";
	case ECONNREFUSED: return "ECONNREFUSED";
	case ENETUNREACH: return "ENETUNREACH";
	case ENOSPC: return "ENOSPC";
	case EBADF: return "EBADF";
	case EBUSY: return "EBUSY";
	case EEXIST: return "EEXIST";
	default: return "other";
	}
}

static int probe(int argc, char **argv)
{
	const char *what = argv[0];
	int e = 0;
	if (strcmp(what, "connect-abstract") == 0 && argc > 1) {
		int s = socket(AF_UNIX, SOCK_STREAM, 0);
		struct sockaddr_un a = { .sun_family = AF_UNIX };
		size_t n = strlen(argv[1]);
		memcpy(a.sun_path + 1, argv[1], n);
		if (connect(s, (struct sockaddr *)&a, (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n)) < 0)
			e = errno;
	} else if (strcmp(what, "connect-tcp") == 0 && argc > 1) {
		int s = socket(AF_INET, SOCK_STREAM, 0);
		struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[1])),
		                         .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
		if (connect(s, (struct sockaddr *)&a, sizeof a) < 0)
			e = errno;
	} else if (strcmp(what, "tiocsti") == 0) {
		/* Every fd it has, /dev/tty, and the ioctl number with high bits
		 * set (CVE-2019-10063: a 64-bit request that truncates to TIOCSTI). */
		char c = 'x';
		int results[5], n = 0;
		for (int fd = 0; fd < 3; fd++)
			results[n++] = ioctl(fd, TIOCSTI, &c) < 0 ? errno : 0;
		int tty = open("/dev/tty", O_RDWR | O_NOCTTY);
		results[n++] = tty < 0 ? errno : (ioctl(tty, TIOCSTI, &c) < 0 ? errno : 0);
		results[n++] = syscall(SYS_ioctl, 0, (unsigned long)TIOCSTI | (1UL << 32), &c) < 0 ? errno : 0;
		/* "EPERM" stands for "every attempt refused", whatever the reasons. */
		e = EPERM;
		for (int i = 0; i < n; i++)
			if (results[i] == 0)
				e = 0;
	} else if (strcmp(what, "ptrace") == 0 && argc > 1) {
		/* PTRACE_SEIZE asks the same permission as PTRACE_ATTACH
		 * without stopping the target if it is granted. */
		pid_t pid = (pid_t)atoi(argv[1]);
		if (ptrace(PTRACE_SEIZE, pid, NULL, NULL) < 0)
			e = errno;
		else
			ptrace(PTRACE_DETACH, pid, NULL, NULL);
	} else if (strcmp(what, "kill") == 0 && argc > 1) {
		if (kill((pid_t)atoi(argv[1]), 0) < 0)
			e = errno;
	} else if (strcmp(what, "read") == 0 && argc > 1) {
		int fd = open(argv[1], O_RDONLY);
		char b;
		if (fd < 0 || read(fd, &b, 1) < 0)
			e = errno;
	} else if (strcmp(what, "create") == 0 && argc > 1) {
		int fd = open(argv[1], O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (fd < 0 || write(fd, "pwned\n", 6) != 6)
			e = errno;
	} else if (strcmp(what, "mkdir") == 0 && argc > 1) {
		if (mkdir(argv[1], 0755) < 0)
			e = errno;
	} else if (strcmp(what, "link") == 0 && argc > 2) {
		if (link(argv[1], argv[2]) < 0)
			e = errno;
	} else if (strcmp(what, "rename") == 0 && argc > 2) {
		if (rename(argv[1], argv[2]) < 0)
			e = errno;
	} else if (strcmp(what, "unshare-user") == 0) {
		if (unshare(CLONE_NEWUSER) < 0)
			e = errno;
	} else if (strcmp(what, "mount") == 0) {
		if (syscall(SYS_mount, "none", "/tmp", "tmpfs", 0UL, NULL) < 0)
			e = errno;
	} else {
		return 2;
	}
	printf("%s=%s\n", what, errname(e));
	return 0;
}

/* ------------------------------------------------------------ fixture */

static sbx_sandbox *sandbox;
static char outside[128];  /* visible inside, never writable: /var/tmp/... */
static char work[160];     /* writable inside: /var/tmp/.../work */

static void rm_tree(const char *path);

/* Removes the test's directories at exit, which also covers a test that
 * failed: Check ends a failed test's process before the teardown runs. */
static void remove_outside(void)
{
	if (outside[0]) {
		rm_tree(outside);
		outside[0] = '\0';
	}
}

static void iso_setup(void)
{
	atexit(remove_outside);
	/* Under the scripts' own directory when they give one (they remove it
	 * whatever a failed test left), else /var/tmp; never a name another
	 * test could have left behind. */
	const char *base = getenv("SBX_TEST_TMPDIR");
	snprintf(outside, sizeof outside, "%s/sbx-iso-XXXXXX", base && base[0] == '/' ? base : "/var/tmp");
	ck_assert_ptr_nonnull(mkdtemp(outside));
	ck_assert_int_eq(chmod(outside, 0755), 0);
	snprintf(work, sizeof work, "%s/work", outside);
	ck_assert_int_eq(mkdir(work, 0755), 0);
}

static void rm_tree(const char *path)
{
	char cmd[512];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", path);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", path);
}

static void iso_teardown(void)
{
	if (sandbox) {
		sbx_sandbox_free(sandbox);
		sandbox = NULL;
	}
	remove_outside();
}

/* A bwrap sandbox over |p| (NULL: |work| writable). */
static sbx_sandbox *make_sandbox(sbx_policy *p)
{
	sbx_policy *own = NULL;
	if (!p) {
		own = p = sbx_policy_new();
		ck_assert_int_eq(sbx_policy_add_writable(p, work, NULL), 0);
	}
	sbx_sandbox_options so;
	sbx_sandbox_options_init(&so);
	so.backend = SBX_BACKEND_BWRAP;
	so.require_isolation = true;
	sbx_error err;
	int rc = sbx_sandbox_new(tu_base, p, &so, &sandbox, &err);
	ck_assert_msg(rc == 0, "sbx_sandbox_new: %s", err.message);
	sbx_policy_free(own);
	ck_assert(sbx_sandbox_isolated(sandbox));
	return sandbox;
}

/* Runs a shell command in the sandbox; the fixture frees the result. */
static tu_call call;
static sbx_result *sh(const char *cmd)
{
	tu_call_done(&call);
	sbx_run_options o;
	sbx_run_options_init(&o);
	o.shell = cmd;
	o.timeout = 20;
	sbx_result *r = tu_run(sandbox, &o, &call);
	ck_assert_msg(r->error == NULL, "error: %s", r->error);
	return r;
}

/* Runs "probe WHAT ARGS..." in the sandbox and returns its answer. */
static const char *probe_in(const char *what, const char *a1, const char *a2)
{
	static char answer[128];
	static tu_cmd c;
	tu_call_done(&call);
	sbx_run_options o;
	sbx_run_options_init(&o);
	tu_helper(&o, &c, "probe", what, a1);
	if (a2) {
		size_t n = 0;
		while (c.argv[n])
			n++;
		c.argv[n] = a2;
		c.argv[n + 1] = NULL;
	}
	o.timeout = 20;
	sbx_result *r = tu_run(sandbox, &o, &call);
	ck_assert_msg(r->exited && r->exit_code == 0, "probe %s failed: exit %d signal %d error %s stderr %s",
	              what, r->exit_code, r->signal, r->error, r->out[SBX_STDERR].data);
	snprintf(answer, sizeof answer, "%s", r->out[SBX_STDOUT].data);
	answer[strcspn(answer, "\n")] = '\0';
	return strchr(answer, '=') ? strchr(answer, '=') + 1 : answer;
}

static void write_host(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	fclose(f);
}

static char *read_host(const char *path)
{
	static char buf[256];
	FILE *f = fopen(path, "r");
	if (!f)
		return NULL;
	size_t n = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[n] = '\0';
	return buf;
}

#define ck_refused(answer) \
	ck_assert_msg(strcmp((answer), "ok") != 0, "the sandbox allowed it (%s)", (answer))

/* ------------------------------------------------------------ files */

START_TEST(write_outside_writable_fails)
{
	char victim[512], dotdot[512];
	snprintf(victim, sizeof victim, "%s/victim", outside);
	snprintf(dotdot, sizeof dotdot, "%s/../victim", work);
	write_host(victim, "original\n");
	make_sandbox(NULL);

	ck_assert_str_eq(probe_in("create", victim, NULL), "EROFS");
	ck_assert_str_eq(probe_in("create", dotdot, NULL), "EROFS");
	ck_assert_str_eq(probe_in("create", "/etc/sbx-test-file", NULL), "EROFS");
	ck_assert_str_eq(read_host(victim), "original\n");
	ck_assert_int_eq(access("/etc/sbx-test-file", F_OK), -1);
}
END_TEST

START_TEST(write_to_writable_lands_on_host)
{
	char path[256], cmd[512];
	snprintf(path, sizeof path, "%s/made-inside", work);
	snprintf(cmd, sizeof cmd, "echo hello > '%s'", path);
	make_sandbox(NULL);
	sbx_result *r = sh(cmd);
	ck_assert_int_eq(r->exit_code, 0);
	ck_assert_str_eq(read_host(path), "hello\n");
}
END_TEST

START_TEST(hard_link_and_rename_across_boundary_refused)
{
	char victim[512], link_to[512], inner[512], out_to[512];
	snprintf(victim, sizeof victim, "%s/victim", outside);
	snprintf(link_to, sizeof link_to, "%s/hardlink", work);
	snprintf(inner, sizeof inner, "%s/inner", work);
	snprintf(out_to, sizeof out_to, "%s/moved", outside);
	write_host(victim, "original\n");
	write_host(inner, "inner\n");
	make_sandbox(NULL);

	ck_refused(probe_in("link", victim, link_to));
	ck_refused(probe_in("rename", inner, out_to));
	ck_refused(probe_in("rename", victim, link_to));
	ck_assert_str_eq(read_host(victim), "original\n");
	ck_assert_str_eq(read_host(inner), "inner\n");
	ck_assert_int_eq(access(out_to, F_OK), -1);
	ck_assert_int_eq(access(link_to, F_OK), -1);
}
END_TEST

START_TEST(symlink_inside_to_outside_does_not_write_through)
{
	char victim[512], lnk[512];
	snprintf(victim, sizeof victim, "%s/victim", outside);
	snprintf(lnk, sizeof lnk, "%s/escape", work);
	write_host(victim, "original\n");
	make_sandbox(NULL);
	char cmd[4096];
	snprintf(cmd, sizeof cmd, "ln -s '%s' '%s' && echo pwned > '%s'; true", victim, lnk, lnk);
	sh(cmd);
	ck_assert_str_eq(read_host(victim), "original\n");
}
END_TEST

START_TEST(denied_read_is_unreadable)
{
	/* A ~/.ssh-style directory, a single secret file, and both through a
	 * symlink and through an fd the caller holds. */
	char ssh[512], key[512], token[512];
	snprintf(ssh, sizeof ssh, "%s/.ssh", outside);
	snprintf(key, sizeof key, "%s/.ssh/id_rsa", outside);
	snprintf(token, sizeof token, "%s/token", work);
	ck_assert_int_eq(mkdir(ssh, 0700), 0);
	write_host(key, "PRIVATE KEY\n");
	write_host(token, "TOKEN\n");
	sbx_policy *p = sbx_policy_new();
	ck_assert_int_eq(sbx_policy_add_writable(p, work, NULL), 0);
	ck_assert_int_eq(sbx_policy_add_deny_read(p, ssh, NULL), 0);
	ck_assert_int_eq(sbx_policy_add_deny_read(p, token, NULL), 0);
	make_sandbox(p);
	sbx_policy_free(p);

	ck_assert_str_eq(probe_in("read", key, NULL), "EACCES");
	ck_assert_str_eq(probe_in("read", token, NULL), "EACCES");
	char cmd[4096];
	snprintf(cmd, sizeof cmd, "ls '%s' 2>&1; cat '%s' 2>&1; ln -s '%s' '%s/alias' 2>&1; cat '%s/alias' 2>&1; exit 0",
	         ssh, key, token, work, work);
	sbx_result *r = sh(cmd);
	ck_assert(!tu_contains(r->out[SBX_STDOUT].data, "PRIVATE KEY"));
	ck_assert(!tu_contains(r->out[SBX_STDOUT].data, "TOKEN"));
	/* The token is writable-inside-denied: still there, unchanged. */
	ck_assert_str_eq(read_host(token), "TOKEN\n");
}
END_TEST

START_TEST(denied_path_that_did_not_exist_cannot_be_created)
{
	char future[512], below[512], ro_future[512];
	snprintf(future, sizeof future, "%s/future-secret", work);
	snprintf(below, sizeof below, "%s/future-secret/x", work);
	snprintf(ro_future, sizeof ro_future, "%s/future-config", work);
	sbx_policy *p = sbx_policy_new();
	ck_assert_int_eq(sbx_policy_add_writable(p, work, NULL), 0);
	ck_assert_int_eq(sbx_policy_add_deny_read(p, future, NULL), 0);
	ck_assert_int_eq(sbx_policy_add_deny_write(p, ro_future, NULL), 0);
	make_sandbox(p);
	sbx_policy_free(p);

	ck_refused(probe_in("create", future, NULL));
	ck_refused(probe_in("create", below, NULL));
	ck_refused(probe_in("mkdir", below, NULL));
	ck_refused(probe_in("create", ro_future, NULL));
	/* Nothing of it reached the host but, while the sandbox lives, the
	 * empty mount point; freeing the sandbox removes that too. */
	struct stat st;
	ck_assert_int_eq(access(below, F_OK), -1);
	if (stat(future, &st) == 0)
		ck_assert(S_ISDIR(st.st_mode));
	sbx_sandbox_free(sandbox);
	sandbox = NULL;
	ck_assert_int_eq(access(future, F_OK), -1);
	ck_assert_int_eq(access(ro_future, F_OK), -1);
}
END_TEST

START_TEST(deny_write_inside_writable_stays_read_only)
{
	char cfg[512];
	snprintf(cfg, sizeof cfg, "%s/config", work);
	write_host(cfg, "original\n");
	sbx_policy *p = sbx_policy_new();
	ck_assert_int_eq(sbx_policy_add_writable(p, work, NULL), 0);
	ck_assert_int_eq(sbx_policy_add_deny_write(p, cfg, NULL), 0);
	make_sandbox(p);
	sbx_policy_free(p);
	ck_assert_str_eq(probe_in("create", cfg, NULL), "EROFS");
	ck_assert_str_eq(probe_in("read", cfg, NULL), "ok");
	ck_assert_str_eq(read_host(cfg), "original\n");
}
END_TEST

START_TEST(protected_defaults)
{
	/* Inside the writable path: .bashrc, .git/hooks and .git/config stay
	 * read-only.  Under $HOME: .ssh is unreadable. */
	char path[512];
	snprintf(path, sizeof path, "%s/.git", work);
	ck_assert_int_eq(mkdir(path, 0755), 0);
	snprintf(path, sizeof path, "%s/.git/hooks", work);
	ck_assert_int_eq(mkdir(path, 0755), 0);
	snprintf(path, sizeof path, "%s/.git/config", work);
	write_host(path, "[core]\n");
	snprintf(path, sizeof path, "%s/.bashrc", work);
	write_host(path, "# rc\n");
	char home[256];
	snprintf(home, sizeof home, "%s/home", outside);
	ck_assert_int_eq(mkdir(home, 0755), 0);
	snprintf(path, sizeof path, "%s/.ssh", home);
	ck_assert_int_eq(mkdir(path, 0700), 0);
	snprintf(path, sizeof path, "%s/.ssh/id_ed25519", home);
	write_host(path, "PRIVATE KEY\n");
	setenv("HOME", home, 1);
	make_sandbox(NULL);

	snprintf(path, sizeof path, "%s/.bashrc", work);
	ck_assert_str_eq(probe_in("create", path, NULL), "EROFS");
	snprintf(path, sizeof path, "%s/.git/hooks/pre-commit", work);
	ck_assert_str_eq(probe_in("create", path, NULL), "EROFS");
	snprintf(path, sizeof path, "%s/.git/config", work);
	ck_assert_str_eq(probe_in("create", path, NULL), "EROFS");
	snprintf(path, sizeof path, "%s/.ssh/id_ed25519", home);
	ck_assert_str_eq(probe_in("read", path, NULL), "EACCES");
	/* The rest of the workspace stays writable. */
	snprintf(path, sizeof path, "%s/.git/objects", work);
	ck_assert_str_eq(probe_in("mkdir", path, NULL), "ok");
}
END_TEST

START_TEST(protected_defaults_can_be_turned_off)
{
	char path[512];
	snprintf(path, sizeof path, "%s/.bashrc", work);
	write_host(path, "# rc\n");
	sbx_policy *p = sbx_policy_new();
	ck_assert_int_eq(sbx_policy_add_writable(p, work, NULL), 0);
	sbx_policy_set_protect_defaults(p, false);
	make_sandbox(p);
	sbx_policy_free(p);
	ck_assert_str_eq(probe_in("create", path, NULL), "ok");
}
END_TEST

static char host_tmp[64];

static void remove_host_tmp(void)
{
	unlink(host_tmp);
}

START_TEST(tmp_is_private)
{
	char inside[64], cmd[512];
	snprintf(host_tmp, sizeof host_tmp, "/tmp/sbx-iso-visible-%d", (int)getpid());
	atexit(remove_host_tmp);
	snprintf(inside, sizeof inside, "/tmp/sbx-iso-inside-%d", (int)getpid());
	write_host(host_tmp, "host\n");
	make_sandbox(NULL);
	ck_assert_str_eq(probe_in("read", host_tmp, NULL), "ENOENT");
	snprintf(cmd, sizeof cmd, "echo inside > %s && cat %s", inside, inside);
	sbx_result *r = sh(cmd);
	ck_assert_str_eq(r->out[SBX_STDOUT].data, "inside\n");
	ck_assert_int_eq(access(inside, F_OK), -1);
}
END_TEST


/*
 * A source bound by name can be swapped for a link between the check and
 * bwrap's mount, by a command of another run that can write the workspace.
 * The attacker's win is made certain here: $SBX_BWRAP points at a script
 * that swaps the writable directory d for a link to a directory outside
 * just before it starts bwrap.  The run must not write through the link:
 * its source was opened before the swap, so it either binds the real d or
 * (what bwrap 0.8 does, seeing the destination moved) refuses to start.
 */
/* The case of a writable directory |name| in |work| (which _i picks: one
 * named writable on top of |work|, or .git, which the protected defaults
 * pin because .git/hooks is masked inside it). */
static const char *const swapped_names[] = {"d", ".git"};

START_TEST(writable_source_cannot_be_swapped_for_a_link)
{
	const char *name = swapped_names[_i];
	char dir[256], real[256], target[256], script[256], text[2048], cmd[512];
	snprintf(dir, sizeof dir, "%s/%s", work, name);
	snprintf(real, sizeof real, "%s/%s.real", work, name);
	snprintf(target, sizeof target, "%s/target", outside);
	snprintf(script, sizeof script, "%s/swap-then-bwrap", outside);
	ck_assert_int_eq(mkdir(dir, 0777), 0);
	ck_assert_int_eq(mkdir(target, 0777), 0);
	snprintf(cmd, sizeof cmd, "%s/hooks", dir);
	ck_assert_int_eq(mkdir(cmd, 0777), 0);
	snprintf(cmd, sizeof cmd, "%s/hooks", target);
	ck_assert_int_eq(mkdir(cmd, 0777), 0);
	/* Relative, so that bwrap can also follow it at the destination. */
	snprintf(text, sizeof text, "#!/bin/sh\nmv '%s' '%s' && ln -s ../target '%s' && exec bwrap \"$@\"\n",
	         dir, real, dir);
	write_host(script, text);
	ck_assert_int_eq(chmod(script, 0755), 0);
	setenv("SBX_BWRAP", script, 1);

	sbx_policy *p = sbx_policy_new();
	ck_assert_int_eq(sbx_policy_add_writable(p, work, NULL), 0);
	if (_i == 0)
		ck_assert_int_eq(sbx_policy_add_writable(p, dir, NULL), 0);
	make_sandbox(p);
	sbx_policy_free(p);
	snprintf(cmd, sizeof cmd, "touch %s/written", dir);
	sbx_run_options o;
	sbx_run_options_init(&o);
	o.shell = cmd;
	o.timeout = 20;
	sbx_result *r = tu_run(sandbox, &o, &call);
	snprintf(cmd, sizeof cmd, "%s/written", target);
	ck_assert_msg(access(cmd, F_OK) != 0, "the run wrote through the swapped link: %s", cmd);
	if (!r->error) {
		snprintf(cmd, sizeof cmd, "%s/written", real);
		ck_assert_msg(access(cmd, F_OK) == 0, "the run started but did not write into d");
	}
}
END_TEST

/* ------------------------------------------------------------ processes */

START_TEST(supervisor_proc_entries_invisible)
{
	char pid[16], path[64];
	snprintf(pid, sizeof pid, "%d", (int)getpid());
	make_sandbox(NULL);
	snprintf(path, sizeof path, "/proc/%s/environ", pid);
	ck_refused(probe_in("read", path, NULL));
	snprintf(path, sizeof path, "/proc/%s/cmdline", pid);
	ck_refused(probe_in("read", path, NULL));
	snprintf(path, sizeof path, "/proc/%s/root/etc/hostname", pid);
	ck_refused(probe_in("read", path, NULL));
	/* Its own PID namespace: only its own few processes. */
	sbx_result *r = sh("ls /proc | grep -c '^[0-9]'");
	ck_assert_int_le(atoi(r->out[SBX_STDOUT].data), 4);
}
END_TEST

START_TEST(ptrace_and_kill_of_parent_and_sibling_refused)
{
	char token[64], pid[16];
	tu_token(token, sizeof token, "300");
	make_sandbox(NULL);
	/* A sibling run, sleeping. */
	const char *argv[] = { "/bin/sleep", token, NULL };
	sbx_run_options o;
	sbx_run_options_init(&o);
	o.argv = argv;
	tu_call sibling = { 0 };
	tu_start(sandbox, &o, &sibling);
	int spid = tu_loop_until_proc(token, 10);
	snprintf(pid, sizeof pid, "%d", spid);

	/* The sibling and the supervisor, by the pids the host knows them by:
	 * neither exists in the sandbox's PID namespace. */
	ck_assert_str_eq(probe_in("ptrace", pid, NULL), "ESRCH");
	ck_assert_str_eq(probe_in("kill", pid, NULL), "ESRCH");
	snprintf(pid, sizeof pid, "%d", (int)getpid());
	ck_assert_str_eq(probe_in("ptrace", pid, NULL), "ESRCH");
	ck_assert_str_eq(probe_in("kill", pid, NULL), "ESRCH");
	ck_assert_int_eq(kill(spid, 0), 0);
	sbx_run_cancel(sibling.run);
	tu_wait(&sibling);
	tu_call_done(&sibling);
}
END_TEST

START_TEST(no_inherited_fds)
{
	int secret = open("/etc/hostname", O_RDONLY); /* not close-on-exec */
	int pipefd[2];
	ck_assert_int_ge(secret, 0);
	ck_assert_int_eq(pipe(pipefd), 0);
	make_sandbox(NULL);
	tu_call_done(&call);
	static tu_cmd c;
	sbx_run_options o;
	sbx_run_options_init(&o);
	tu_helper(&o, &c, "fds", NULL, NULL);
	sbx_result *r = tu_run(sandbox, &o, &call);
	ck_assert_str_eq(r->out[SBX_STDOUT].data, "0 1 2\n");
	close(secret);
	close(pipefd[0]);
	close(pipefd[1]);
}
END_TEST

START_TEST(no_tiocsti_on_the_callers_terminal)
{
	/* Give this test process a real controlling terminal, as a user at a
	 * shell has, and check the sandbox cannot push input into it. */
	int master = posix_openpt(O_RDWR | O_NOCTTY);
	ck_assert_int_ge(master, 0);
	ck_assert_int_eq(grantpt(master), 0);
	ck_assert_int_eq(unlockpt(master), 0);
	setsid();
	int slave = open(ptsname(master), O_RDWR);
	ck_assert_int_ge(slave, 0);
	ioctl(slave, TIOCSCTTY, 0);
	make_sandbox(NULL);
	ck_assert_str_eq(probe_in("tiocsti", NULL, NULL), "EPERM");
	/* Nothing arrived on the terminal. */
	fcntl(slave, F_SETFL, O_NONBLOCK);
	char b;
	ck_assert_int_eq(read(slave, &b, 1), -1);
	close(slave);
	close(master);
}
END_TEST

START_TEST(no_new_privs_and_no_capabilities)
{
	make_sandbox(NULL);
	sbx_result *r = sh("grep -E '^(NoNewPrivs|CapInh|CapPrm|CapEff|CapBnd|CapAmb):' /proc/self/status");
	const char *out = r->out[SBX_STDOUT].data;
	ck_assert_msg(tu_contains(out, "NoNewPrivs:\t1"), "%s", out);
	ck_assert_msg(tu_contains(out, "CapEff:\t0000000000000000"), "%s", out);
	ck_assert_msg(tu_contains(out, "CapPrm:\t0000000000000000"), "%s", out);
	ck_assert_msg(tu_contains(out, "CapInh:\t0000000000000000"), "%s", out);
	ck_assert_msg(tu_contains(out, "CapBnd:\t0000000000000000"), "%s", out);
	ck_assert_msg(tu_contains(out, "CapAmb:\t0000000000000000"), "%s", out);
	/* A setuid binary gains nothing (tests/unprivileged.sh makes one as root). */
	const char *suid = getenv("SBX_TEST_SETUID_ID");
	if (suid && getuid() != 0) {
		char cmd[512], want[32];
		snprintf(cmd, sizeof cmd, "'%s' -u", suid);
		snprintf(want, sizeof want, "%u\n", (unsigned)getuid());
		r = sh(cmd);
		ck_assert_str_eq(r->out[SBX_STDOUT].data, want);
	}
}
END_TEST

START_TEST(mount_and_nested_userns_refused)
{
	make_sandbox(NULL);
	ck_refused(probe_in("mount", NULL, NULL));
	ck_refused(probe_in("unshare-user", NULL, NULL));
}
END_TEST

START_TEST(detached_processes_do_not_survive)
{
	char token[64], cmd[512];
	tu_token(token, sizeof token, "1000");
	snprintf(cmd, sizeof cmd, "setsid sh -c 'sleep %s &'; exit 0", token);
	make_sandbox(NULL);
	sh(cmd);
	ck_assert_msg(tu_wait_gone(token, 1.0), "a detached sleep survived the run");
}
END_TEST

START_TEST(timeout_kills_the_whole_namespace)
{
	char token[64], cmd[512];
	tu_token(token, sizeof token, "1001");
	snprintf(cmd, sizeof cmd, "setsid sleep %s & (trap '' TERM; sleep %s) & sleep %s", token, token, token);
	make_sandbox(NULL);
	tu_call_done(&call);
	sbx_run_options o;
	sbx_run_options_init(&o);
	o.shell = cmd;
	o.timeout = 1;
	sbx_result *r = tu_run(sandbox, &o, &call);
	ck_assert(r->timed_out);
	ck_assert(!r->exited);
	ck_assert_msg(tu_wait_gone(token, 1.0), "a process outlived the timeout");
}
END_TEST

/* Runs a supervisor (this binary, mode "supervise" with bwrap), SIGKILLs it
 * while its sandboxed sleep runs, and expects the sleep gone within 1 s. */
START_TEST(supervisor_killed_leaves_nothing)
{
	char token[64];
	tu_token(token, sizeof token, "1002");
	pid_t sup = fork();
	ck_assert_int_ge(sup, 0);
	if (sup == 0) {
		execl(tu_self(), tu_self(), "--helper", "supervise", token, "bwrap", (char *)NULL);
		_exit(127);
	}
	/* Mid-run: the sleep itself runs.  (During bwrap's own set-up there is
	 * a window in which --die-with-parent is not armed yet; see the note in
	 * lib/backend_bwrap.c.) */
	double t0 = tu_now();
	while (!tu_find_prog(token, "sleep") && tu_now() - t0 < 10)
		usleep(10000);
	ck_assert_msg(tu_find_prog(token, "sleep"), "the sandboxed sleep never started");
	kill(sup, SIGKILL);
	waitpid(sup, NULL, 0);
	ck_assert_msg(tu_wait_gone(token, 1.0), "the sandboxed sleep outlived its supervisor");
}
END_TEST

/* ------------------------------------------------------------ network */

START_TEST(network_none_has_only_loopback)
{
	make_sandbox(NULL);
	/* /proc/net shows the reader's network namespace (/sys is the host's). */
	sbx_result *r = sh("tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '");
	ck_assert_str_eq(r->out[SBX_STDOUT].data, "lo\n");
}
END_TEST

START_TEST(network_none_refuses_host_sockets)
{
	/* A host abstract unix socket and a host loopback TCP listener. */
	char name[64];
	snprintf(name, sizeof name, "sbx-test-%d", (int)getpid());
	int us = socket(AF_UNIX, SOCK_STREAM, 0);
	struct sockaddr_un ua = { .sun_family = AF_UNIX };
	memcpy(ua.sun_path + 1, name, strlen(name));
	socklen_t ulen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + strlen(name));
	ck_assert_int_eq(bind(us, (struct sockaddr *)&ua, ulen), 0);
	ck_assert_int_eq(listen(us, 4), 0);
	int ts = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in ta = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	ck_assert_int_eq(bind(ts, (struct sockaddr *)&ta, sizeof ta), 0);
	ck_assert_int_eq(listen(ts, 4), 0);
	socklen_t tlen = sizeof ta;
	getsockname(ts, (struct sockaddr *)&ta, &tlen);
	char port[16];
	snprintf(port, sizeof port, "%d", ntohs(ta.sin_port));

	make_sandbox(NULL);
	ck_assert_str_eq(probe_in("connect-abstract", name, NULL), "ECONNREFUSED");
	ck_assert_str_eq(probe_in("connect-tcp", port, NULL), "ECONNREFUSED");

	/* With the network full, the same listener answers: the probe is sound. */
	sbx_sandbox_free(sandbox);
	sandbox = NULL;
	sbx_policy *p = sbx_policy_new();
	sbx_policy_set_network(p, SBX_NETWORK_FULL, NULL);
	make_sandbox(p);
	sbx_policy_free(p);
	ck_assert_str_eq(probe_in("connect-tcp", port, NULL), "ok");
	close(us);
	close(ts);
}
END_TEST

/* ------------------------------------------------------------ setup failures */

START_TEST(missing_bwrap_names_the_package)
{
	setenv("SBX_BWRAP", "/nonexistent/bwrap", 1);
	sbx_sandbox_options so;
	sbx_sandbox_options_init(&so);
	so.backend = SBX_BACKEND_BWRAP;
	sbx_error err;
	sbx_sandbox *sb = NULL;
	ck_assert_int_eq(sbx_sandbox_new(tu_base, NULL, &so, &sb, &err), SBX_EUNAVAILABLE);
	ck_assert_ptr_null(sb);
	ck_assert_msg(tu_contains(err.message, "bubblewrap") && tu_contains(err.message, "apt-get install"),
	              "%s", err.message);
	unsetenv("SBX_BWRAP");
}
END_TEST

START_TEST(setup_failure_is_an_error_not_exit_code_1)
{
	/* A working directory bwrap cannot enter: the sandbox fails to set up. */
	char cwd[512];
	snprintf(cwd, sizeof cwd, "%s/only-on-host", outside);
	ck_assert_int_eq(mkdir(cwd, 0755), 0);
	sbx_policy *p = sbx_policy_new();
	ck_assert_int_eq(sbx_policy_add_deny_read(p, cwd, NULL), 0);
	make_sandbox(p);
	sbx_policy_free(p);
	tu_call_done(&call);
	sbx_run_options o;
	sbx_run_options_init(&o);
	o.shell = "exit 1";
	o.cwd = cwd;
	sbx_result *r = tu_run(sandbox, &o, &call);
	ck_assert(!r->exited);
	ck_assert_int_eq(r->exit_code, -1);
	ck_assert_ptr_nonnull(r->error);
	ck_assert_msg(tu_contains(r->error, "could not be set up"), "%s", r->error);
}
END_TEST

START_TEST(exit_status_and_missing_program)
{
	make_sandbox(NULL);
	sbx_result *r = sh("exit 7");
	ck_assert(r->exited);
	ck_assert_int_eq(r->exit_code, 7);
	r = sh("kill -TERM $$");
	ck_assert(!r->exited);
	ck_assert_int_eq(r->signal, SIGTERM);

	tu_call_done(&call);
	const char *argv[] = { "no-such-program-sbx", NULL };
	sbx_run_options o;
	sbx_run_options_init(&o);
	o.argv = argv;
	r = tu_run(sandbox, &o, &call);
	ck_assert(!r->exited);
	ck_assert_int_eq(r->start_errno, ENOENT);
	ck_assert_ptr_nonnull(r->error);
	ck_assert(r->isolated);
	ck_assert_str_eq(r->backend, "bwrap");
}
END_TEST

START_TEST(many_concurrent_isolated_runs)
{
	tu_raise_nofile();
	make_sandbox(NULL);
	enum { N = 40 };
	static tu_call calls[N];
	static char cmds[N][32];
	for (int i = 0; i < N; i++) {
		sbx_run_options o;
		sbx_run_options_init(&o);
		snprintf(cmds[i], sizeof cmds[i], "exit %d", i % 5);
		o.shell = cmds[i];
		tu_start(sandbox, &o, &calls[i]);
	}
	for (int i = 0; i < N; i++) {
		tu_wait(&calls[i]);
		ck_assert_msg(calls[i].result->exited && calls[i].result->exit_code == i % 5,
		              "run %d: exit %d error %s", i, calls[i].result->exit_code,
		              calls[i].result->error);
		tu_call_done(&calls[i]);
	}
}
END_TEST

START_TEST(command_environment_does_not_reach_bwrap)
{
	/* bwrap runs outside the sandbox: LD_PRELOAD and friends given to the
	 * command must not be in its environment (they would run code on the
	 * host before any namespace exists). */
	make_sandbox(NULL);
	char token[64];
	tu_token(token, sizeof token, "30");
	const char *argv[] = { "/bin/sleep", token, NULL };
	const char *env[] = { "LD_PRELOAD=/nonexistent/evil.so", "SBX_MARK=inside", NULL };
	sbx_run_options o;
	sbx_run_options_init(&o);
	o.argv = argv;
	o.env = env;
	tu_call c = { 0 };
	tu_start(sandbox, &o, &c);
	/* Once the command runs, bwrap is settled in its own environment. */
	double t0 = tu_now();
	while (!tu_find_prog(token, "sleep") && tu_now() - t0 < 10)
		event_base_loop(tu_base, EVLOOP_ONCE | EVLOOP_NONBLOCK), usleep(5000);
	ck_assert_msg(tu_find_prog(token, "sleep"), "the sandboxed sleep never started");
	char path[64], buf[8192];
	snprintf(path, sizeof path, "/proc/%d/environ", sbx_run_pid(c.run));
	int fd = open(path, O_RDONLY);
	ck_assert_int_ge(fd, 0);
	ssize_t n = read(fd, buf, sizeof buf - 1);
	close(fd);
	ck_assert_int_gt(n, 0);
	buf[n] = '\0';
	for (char *v = buf; v < buf + n; v += strlen(v) + 1)
		ck_assert_msg(strncmp(v, "LD_PRELOAD=", 11) != 0 && strncmp(v, "SBX_MARK=", 9) != 0,
		              "bwrap's own environment holds %s", v);
	sbx_run_cancel(c.run);
	tu_wait(&c);
	tu_call_done(&c);
}
END_TEST

START_TEST(hidden_file_inside_protected_directory_stays_hidden)
{
	/* A read-only default (.vscode) must not uncover a denial inside it. */
	char dir[256], token[320];
	snprintf(dir, sizeof dir, "%s/.vscode", work);
	snprintf(token, sizeof token, "%s/.vscode/token", work);
	ck_assert_int_eq(mkdir(dir, 0755), 0);
	write_host(token, "TOPSECRET\n");
	sbx_policy *p = sbx_policy_new();
	ck_assert_int_eq(sbx_policy_add_writable(p, work, NULL), 0);
	ck_assert_int_eq(sbx_policy_add_deny_read(p, token, NULL), 0);
	make_sandbox(p);
	sbx_policy_free(p);
	ck_assert_str_eq(probe_in("read", token, NULL), "EACCES");
}
END_TEST

START_TEST(renaming_a_parent_does_not_lift_a_mask)
{
	/* Renaming the directory above a read-only path, then making a new one
	 * in its place, would put a fresh writable file at the protected name.
	 * The parents are mount points: they cannot be renamed. */
	char path[320], cmd[1024];
	snprintf(path, sizeof path, "%s/conf", work);
	ck_assert_int_eq(mkdir(path, 0755), 0);
	snprintf(path, sizeof path, "%s/conf/settings.json", work);
	write_host(path, "original\n");
	snprintf(path, sizeof path, "%s/.git", work);
	ck_assert_int_eq(mkdir(path, 0755), 0);
	snprintf(path, sizeof path, "%s/.git/hooks", work);
	ck_assert_int_eq(mkdir(path, 0755), 0);
	snprintf(path, sizeof path, "%s/conf/settings.json", work);
	sbx_policy *p = sbx_policy_new();
	ck_assert_int_eq(sbx_policy_add_writable(p, work, NULL), 0);
	ck_assert_int_eq(sbx_policy_add_deny_write(p, path, NULL), 0);
	make_sandbox(p);
	sbx_policy_free(p);
	snprintf(cmd, sizeof cmd,
	         "cd '%s'; mv conf conf.old; mkdir -p conf; echo EVIL > conf/settings.json; "
	         "mv .git .git.old; mkdir -p .git/hooks; echo EVIL > .git/hooks/pre-commit; "
	         "echo x > .git/objects-ok; exit 0", work);
	sh(cmd);
	ck_assert_str_eq(read_host(path), "original\n");
	snprintf(path, sizeof path, "%s/.git/hooks/pre-commit", work);
	ck_assert_int_eq(access(path, F_OK), -1);
	/* The parent itself stays writable. */
	snprintf(path, sizeof path, "%s/.git/objects-ok", work);
	ck_assert_str_eq(read_host(path), "x\n");
}
END_TEST

START_TEST(writable_path_through_a_link_is_refused)
{
	/* A link planted in a workspace (by an earlier run, say) must not carry
	 * write access to where it points. */
	char victim[256], lnk[256];
	snprintf(victim, sizeof victim, "%s/victim-dir", outside);
	snprintf(lnk, sizeof lnk, "%s/out", work);
	ck_assert_int_eq(mkdir(victim, 0755), 0);
	ck_assert_int_eq(symlink(victim, lnk), 0);
	sbx_policy *p = sbx_policy_new();
	ck_assert_int_eq(sbx_policy_add_writable(p, lnk, NULL), 0);
	sbx_sandbox_options so;
	sbx_sandbox_options_init(&so);
	so.backend = SBX_BACKEND_BWRAP;
	ck_assert_int_eq(sbx_sandbox_new(tu_base, p, &so, &sandbox, NULL), 0);
	sbx_policy_free(p);
	const char *argv[] = { "/bin/true", NULL };
	sbx_run_options o;
	sbx_run_options_init(&o);
	o.argv = argv;
	sbx_error err;
	tu_call c = { 0 };
	ck_assert_int_eq(sbx_run_start(sandbox, &o, tu_call_cb, &c, NULL, &err), -ELOOP);
	ck_assert_msg(tu_contains(err.message, "symbolic link"), "%s", err.message);
	ck_assert_int_eq(c.calls, 0);
}
END_TEST

static Suite *isolation_suite(void)
{
	Suite *s = suite_create("isolation");
	TCase *tc = tu_tcase("bwrap", TU_TIMEOUT);
	tcase_add_checked_fixture(tc, iso_setup, iso_teardown);
	tcase_add_test(tc, write_outside_writable_fails);
	tcase_add_test(tc, write_to_writable_lands_on_host);
	tcase_add_test(tc, hard_link_and_rename_across_boundary_refused);
	tcase_add_test(tc, symlink_inside_to_outside_does_not_write_through);
	tcase_add_loop_test(tc, writable_source_cannot_be_swapped_for_a_link, 0, 2);
	tcase_add_test(tc, denied_read_is_unreadable);
	tcase_add_test(tc, denied_path_that_did_not_exist_cannot_be_created);
	tcase_add_test(tc, deny_write_inside_writable_stays_read_only);
	tcase_add_test(tc, protected_defaults);
	tcase_add_test(tc, protected_defaults_can_be_turned_off);
	tcase_add_test(tc, tmp_is_private);
	tcase_add_test(tc, supervisor_proc_entries_invisible);
	tcase_add_test(tc, ptrace_and_kill_of_parent_and_sibling_refused);
	tcase_add_test(tc, no_inherited_fds);
	tcase_add_test(tc, no_tiocsti_on_the_callers_terminal);
	tcase_add_test(tc, no_new_privs_and_no_capabilities);
	tcase_add_test(tc, mount_and_nested_userns_refused);
	tcase_add_test(tc, detached_processes_do_not_survive);
	tcase_add_test(tc, timeout_kills_the_whole_namespace);
	tcase_add_test(tc, supervisor_killed_leaves_nothing);
	tcase_add_test(tc, network_none_has_only_loopback);
	tcase_add_test(tc, network_none_refuses_host_sockets);
	tcase_add_test(tc, missing_bwrap_names_the_package);
	tcase_add_test(tc, setup_failure_is_an_error_not_exit_code_1);
	tcase_add_test(tc, exit_status_and_missing_program);
	tcase_add_test(tc, many_concurrent_isolated_runs);
	tcase_add_test(tc, command_environment_does_not_reach_bwrap);
	tcase_add_test(tc, hidden_file_inside_protected_directory_stays_hidden);
	tcase_add_test(tc, renaming_a_parent_does_not_lift_a_mask);
	tcase_add_test(tc, writable_path_through_a_link_is_refused);
	suite_add_tcase(s, tc);
	return s;
}

int main(int argc, char **argv)
{
	if (argc > 2 && strcmp(argv[1], "--helper") == 0 && strcmp(argv[2], "probe") == 0)
		return probe(argc - 3, argv + 3);
	tu_init(argc, argv);
	return tu_run_suite(isolation_suite());
}
