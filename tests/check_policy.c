/*
 * check_policy.c -- sizes, policies, error names and sandbox creation: the
 * parts of libsbx that validate before anything runs.
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "testutil.h"

static sbx_error fresh_error(void)
{
	sbx_error err;

	memset(&err, 0, sizeof(err));
	err.code = 12345; /* so "not filled in" shows */
	return err;
}

/* Asserts that a call returned a negative code and filled |err| with the
 * same code and a sentence containing |quoted1| and |quoted2| (each may be
 * NULL: not checked). */
static void assert_refused(int rc, const sbx_error *err, const char *call,
                           const char *quoted1, const char *quoted2)
{
	ck_assert_msg(rc < 0, "%s: expected a refusal, got %d", call, rc);
	ck_assert_msg(err->code == rc, "%s: err.code %d differs from the return %d", call,
	              err->code, rc);
	ck_assert_msg(err->message[0] != '\0', "%s: no message", call);
	ck_assert_msg(strnlen(err->message, SBX_ERROR_MAX) < SBX_ERROR_MAX, "%s: message not terminated",
	              call);
	if (quoted1 != NULL)
		ck_assert_msg(tu_contains(err->message, quoted1),
		              "%s: the message \"%s\" does not quote \"%s\"", call, err->message,
		              quoted1);
	if (quoted2 != NULL)
		ck_assert_msg(tu_contains(err->message, quoted2),
		              "%s: the message \"%s\" does not name \"%s\"", call, err->message,
		              quoted2);
}

/* ------------------------------------------------------------- sizes */

static const struct {
	const char *text;
	uint64_t bytes;
} good_sizes[] = {
	{ "512M", 536870912ULL },
	{ "1.5G", 1610612736ULL },
	{ "65536", 65536ULL },
	{ "1", 1ULL },
	{ "1K", 1024ULL },
	{ "2k", 2048ULL },
	{ "1MiB", 1048576ULL },
	{ "1MB", 1048576ULL },
	{ "1mb", 1048576ULL },
	{ "1.5K", 1536ULL },
	{ "0.5K", 512ULL },
	{ "0.75K", 768ULL },
	{ "1.0K", 1024ULL },
	{ "1.25K", 1280ULL },
	{ "2.75M", 2883584ULL },
	{ "1.375G", 1476395008ULL },
	{ "2.5T", 2748779069440ULL },
	{ "3g", 3221225472ULL },
	{ "1T", 1099511627776ULL },
	{ "2TiB", 2199023255552ULL },
	{ "16777215T", 16777215ULL << 40 },
	{ "9007199254740993", 9007199254740993ULL },
	{ "18446744073709551615", 18446744073709551615ULL },
};

START_TEST(parse_size_accepts)
{
	const char *text = good_sizes[_i].text;
	sbx_error err = fresh_error();
	uint64_t out = 0;
	int rc = sbx_parse_size(text, "--memory", &out, &err);

	ck_assert_msg(rc == 0, "\"%s\" refused: %d %s", text, rc, err.message);
	ck_assert_msg(out == good_sizes[_i].bytes, "\"%s\" gave %llu, expected %llu", text,
	              (unsigned long long)out, (unsigned long long)good_sizes[_i].bytes);
}
END_TEST

static const char *const bad_sizes[] = {
	"0", "0K", "-5", " -5", "-1K", "", "123bogus", "1.5", "0.5", "1.0001K", "99999999999T",
	"18446744073709551616", "16777216T", "K", "1X", "1KK", "1 K", "1e3", "0x10", "1..5K",
	"nan", "inf",
};

START_TEST(parse_size_refuses)
{
	const char *text = bad_sizes[_i];
	sbx_error err = fresh_error();
	uint64_t out = 777;
	int rc = sbx_parse_size(text, "--max-file-size", &out, &err);

	assert_refused(rc, &err, text, text[0] ? text : NULL, "--max-file-size");
	if (text[0] == '\0')
		ck_assert_msg(tu_contains(err.message, "''") || tu_contains(err.message, "\"\""),
		              "the empty value is not quoted: %s", err.message);
}
END_TEST

START_TEST(parse_size_refuses_null_and_tolerates_null_error)
{
	sbx_error err = fresh_error();
	uint64_t out = 0;

	assert_refused(sbx_parse_size(NULL, "--memory", &out, &err), &err, "NULL", NULL,
	               "--memory");
	/* The error struct is optional. */
	ck_assert_int_lt(sbx_parse_size("123bogus", "--memory", &out, NULL), 0);
	ck_assert_int_eq(sbx_parse_size("4K", "--memory", &out, NULL), 0);
	ck_assert_uint_eq(out, 4096);
}
END_TEST

/* ------------------------------------------------------------ policy */

typedef int (*path_setter)(sbx_policy *, const char *, sbx_error *);

static const struct {
	const char *name;
	path_setter set;
} path_setters[] = {
	{ "sbx_policy_add_writable", sbx_policy_add_writable },
	{ "sbx_policy_add_deny_write", sbx_policy_add_deny_write },
	{ "sbx_policy_add_deny_read", sbx_policy_add_deny_read },
};

START_TEST(policy_paths_refused)
{
	path_setter set = path_setters[_i].set;
	const char *name = path_setters[_i].name;
	sbx_policy *p = sbx_policy_new();
	char *longpath = malloc(PATH_MAX + 2);
	char prefix[65];
	sbx_error err;

	ck_assert_ptr_nonnull(p);
	ck_assert_ptr_nonnull(longpath);
	longpath[0] = '/';
	memset(longpath + 1, 'a', PATH_MAX);
	longpath[PATH_MAX + 1] = '\0'; /* PATH_MAX + 1 bytes */
	memcpy(prefix, longpath, 64);
	prefix[64] = '\0';

	err = fresh_error();
	assert_refused(set(p, "relative/path", &err), &err, name, "relative/path", NULL);
	err = fresh_error();
	assert_refused(set(p, "./here", &err), &err, name, "./here", NULL);
	err = fresh_error();
	assert_refused(set(p, "", &err), &err, name, NULL, NULL);
	err = fresh_error();
	assert_refused(set(p, longpath, &err), &err, name, prefix, NULL);
	err = fresh_error();
	assert_refused(set(p, NULL, &err), &err, name, NULL, NULL);
	/* A refusal without an error struct is still a refusal. */
	ck_assert_int_lt(set(p, "relative", NULL), 0);

	free(longpath);
	sbx_policy_free(p);
}
END_TEST

START_TEST(policy_paths_accepted)
{
	sbx_policy *p = sbx_policy_new();
	char *deep = malloc(1200);
	sbx_error err = fresh_error();

	ck_assert_ptr_nonnull(p);
	ck_assert_ptr_nonnull(deep);
	/* A denied path need not exist, and may be long. */
	deep[0] = '/';
	for (int i = 1; i < 1199; i++)
		deep[i] = (i % 10 == 0) ? '/' : 'd';
	deep[1199] = '\0';
	ck_assert_msg(sbx_policy_add_writable(p, tu_tmpdir(), &err) == 0, "%s", err.message);
	ck_assert_msg(sbx_policy_add_deny_write(p, "/nonexistent/sbx/deny-write", &err) == 0, "%s",
	              err.message);
	ck_assert_msg(sbx_policy_add_deny_read(p, "/nonexistent/sbx/deny-read", &err) == 0, "%s",
	              err.message);
	ck_assert_msg(sbx_policy_add_deny_read(p, deep, &err) == 0, "%s", err.message);
	free(deep);
	sbx_policy_free(p);
}
END_TEST

/*
 * "~/" is expanded from $HOME: a HOME so long that the expansion passes
 * PATH_MAX is refused with the expanded value quoted, a short one is
 * accepted, and a relative HOME gives a relative path, which is refused.
 */
START_TEST(policy_path_tilde_expanded_from_home)
{
	sbx_policy *p = sbx_policy_new();
	char *home = malloc(PATH_MAX);
	sbx_error err = fresh_error();
	char marker[32];

	ck_assert_ptr_nonnull(p);
	ck_assert_ptr_nonnull(home);
	snprintf(marker, sizeof(marker), "/homemarker%d", 4242);
	memset(home, 'h', PATH_MAX - 1);
	memcpy(home, marker, strlen(marker));
	home[PATH_MAX - 10] = '\0';
	ck_assert_int_eq(setenv("HOME", home, 1), 0);
	assert_refused(sbx_policy_add_deny_read(p, "~/some/longer/tail/past/path_max", &err), &err,
	               "~/ with a long HOME", NULL, NULL);
	ck_assert_msg(tu_contains(err.message, marker) || tu_contains(err.message, "~/some"),
	              "the message \"%s\" quotes neither the value nor its expansion", err.message);

	ck_assert_int_eq(setenv("HOME", tu_tmpdir(), 1), 0);
	err = fresh_error();
	ck_assert_msg(sbx_policy_add_writable(p, "~/", &err) == 0, "%s", err.message);
	ck_assert_msg(sbx_policy_add_deny_read(p, "~/x", &err) == 0, "%s", err.message);

	ck_assert_int_eq(setenv("HOME", "relative-home", 1), 0);
	err = fresh_error();
	assert_refused(sbx_policy_add_deny_read(p, "~/x", &err), &err, "~/ with a relative HOME",
	               NULL, NULL);
	free(home);
	sbx_policy_free(p);
}
END_TEST

START_TEST(policy_limits_refuse_zero_and_out_of_range)
{
	sbx_policy *p = sbx_policy_new();
	sbx_error err;

	ck_assert_ptr_nonnull(p);
#define REFUSED(call, quoted)                                  \
	do {                                                   \
		err = fresh_error();                           \
		assert_refused((call), &err, #call, quoted, NULL); \
	} while (0)
	REFUSED(sbx_policy_set_memory(p, 0, &err), "0");
	REFUSED(sbx_policy_set_cpu_seconds(p, 0, &err), "0");
	REFUSED(sbx_policy_set_processes(p, 0, &err), "0");
	REFUSED(sbx_policy_set_file_size(p, 0, &err), "0");
	REFUSED(sbx_policy_set_open_files(p, 0, &err), "0");
	REFUSED(sbx_policy_set_cpus(p, 0.0, &err), "0");
	REFUSED(sbx_policy_set_cpus(p, -1.0, &err), "-1");
	REFUSED(sbx_policy_set_cpus(p, NAN, &err), NULL);
	REFUSED(sbx_policy_set_cpus(p, INFINITY, &err), NULL);
	REFUSED(sbx_policy_set_network(p, (enum sbx_network)7, &err), "7");
	REFUSED(sbx_policy_set_memory_strategy(p, (enum sbx_memory_strategy)99, &err), "99");
#undef REFUSED
	/* The error struct is optional. */
	ck_assert_int_lt(sbx_policy_set_memory(p, 0, NULL), 0);
	ck_assert_int_lt(sbx_policy_set_cpus(p, NAN, NULL), 0);
	sbx_policy_free(p);
}
END_TEST

START_TEST(policy_limits_accept_positive)
{
	sbx_policy *p = sbx_policy_new();
	sbx_error err = fresh_error();

	ck_assert_ptr_nonnull(p);
	ck_assert_int_eq(sbx_policy_set_memory(p, 1, &err), 0);
	ck_assert_int_eq(sbx_policy_set_memory(p, 512ULL << 20, &err), 0);
	ck_assert_int_eq(sbx_policy_set_cpus(p, 0.5, &err), 0);
	ck_assert_int_eq(sbx_policy_set_cpus(p, 2.0, &err), 0);
	ck_assert_int_eq(sbx_policy_set_cpu_seconds(p, 30, &err), 0);
	ck_assert_int_eq(sbx_policy_set_processes(p, 64, &err), 0);
	ck_assert_int_eq(sbx_policy_set_file_size(p, 10 << 20, &err), 0);
	ck_assert_int_eq(sbx_policy_set_open_files(p, 256, &err), 0);
	ck_assert_int_eq(sbx_policy_set_core_dumps(p, true), 0);
	ck_assert_int_eq(sbx_policy_set_core_dumps(p, false), 0);
	ck_assert_int_eq(sbx_policy_set_protect_defaults(p, false), 0);
	ck_assert_int_eq(sbx_policy_set_network(p, SBX_NETWORK_FULL, &err), 0);
	ck_assert_int_eq(sbx_policy_set_network(p, SBX_NETWORK_NONE, &err), 0);
	for (int s = SBX_MEMORY_AUTO; s <= SBX_MEMORY_NONE; s++)
		ck_assert_int_eq(sbx_policy_set_memory_strategy(p, (enum sbx_memory_strategy)s, &err),
		                 0);
	sbx_policy_free(p);
}
END_TEST

START_TEST(policy_env_validated)
{
	sbx_policy *p = sbx_policy_new();
	sbx_error err;

	ck_assert_ptr_nonnull(p);
	err = fresh_error();
	ck_assert_msg(sbx_policy_set_env(p, "NAME=value", &err) == 0, "%s", err.message);
	ck_assert_msg(sbx_policy_set_env(p, "EMPTY=", &err) == 0, "%s", err.message);
	ck_assert_msg(sbx_policy_set_env(p, "NAME=later=wins", &err) == 0, "%s", err.message);
	ck_assert_msg(sbx_policy_allow_env(p, "LANG", &err) == 0, "%s", err.message);
	err = fresh_error();
	assert_refused(sbx_policy_set_env(p, "NOEQUALS", &err), &err, "set_env", "NOEQUALS", NULL);
	err = fresh_error();
	assert_refused(sbx_policy_set_env(p, "=value", &err), &err, "set_env", "=value", NULL);
	err = fresh_error();
	assert_refused(sbx_policy_set_env(p, NULL, &err), &err, "set_env NULL", NULL, NULL);
	err = fresh_error();
	assert_refused(sbx_policy_allow_env(p, "", &err), &err, "allow_env", NULL, NULL);
	err = fresh_error();
	assert_refused(sbx_policy_allow_env(p, "A=B", &err), &err, "allow_env", "A=B", NULL);
	sbx_policy_free(p);
}
END_TEST

START_TEST(free_functions_ignore_null)
{
	sbx_policy_free(NULL);
	sbx_sandbox_free(NULL);
	sbx_result_free(NULL);
	/* The fixture's teardown then checks no fd or event appeared. */
	ck_assert_int_eq(event_base_get_num_events(tu_base, EVENT_BASE_COUNT_ADDED), 0);
}
END_TEST

/* -------------------------------------------------------------- names */

START_TEST(strerror_names_every_code)
{
	const int codes[] = { 0,          -EINVAL,          -ENOMEM,          -EMFILE,
		              -ENOENT,    -EACCES,          -EPERM,           -ERANGE,
		              -4095,      SBX_EUNAVAILABLE, SBX_ENOISOLATION, SBX_ECLOSED,
		              SBX_ESTATE, -12345,           12345,            INT_MIN,
		              INT_MAX,    -5000,            SBX_EFAILED, -5006 };
	const int own[] = { SBX_EUNAVAILABLE, SBX_ENOISOLATION, SBX_ECLOSED, SBX_ESTATE, SBX_EFAILED };

	for (size_t i = 0; i < sizeof(codes) / sizeof(codes[0]); i++) {
		const char *s = sbx_strerror(codes[i]);

		ck_assert_msg(s != NULL && s[0] != '\0', "sbx_strerror(%d) is empty", codes[i]);
	}
	/* sbx's own codes have names of their own, distinct from each other,
	 * from an errno's and from an unknown code's. */
	for (size_t i = 0; i < 5; i++) {
		ck_assert_str_ne(sbx_strerror(own[i]), sbx_strerror(-12345));
		ck_assert_str_ne(sbx_strerror(own[i]), sbx_strerror(-EINVAL));
		for (size_t j = i + 1; j < 5; j++)
			ck_assert_str_ne(sbx_strerror(own[i]), sbx_strerror(own[j]));
	}
	ck_assert_str_ne(sbx_strerror(-EINVAL), sbx_strerror(-ENOMEM));
}
END_TEST

START_TEST(enum_names_match_the_json_keys)
{
	static const char *const limits[SBX_LIMIT_COUNT] = {
		"memory", "cpus", "cpu_seconds", "processes", "file_size", "open_files", "core_dumps"
	};
	static const char *const hits[SBX_HIT_COUNT] = {
		"memory", "cpu", "processes", "file_size", "output"
	};

	for (int i = 0; i < SBX_LIMIT_COUNT; i++)
		ck_assert_str_eq(sbx_limit_name((enum sbx_limit)i), limits[i]);
	for (int i = 0; i < SBX_HIT_COUNT; i++)
		ck_assert_str_eq(sbx_hit_name((enum sbx_hit)i), hits[i]);
	ck_assert_str_eq(sbx_mechanism_name(SBX_MECH_NONE), "none");
	ck_assert_str_eq(sbx_mechanism_name(SBX_MECH_RLIMIT), "rlimit");
	ck_assert_str_eq(sbx_mechanism_name(SBX_MECH_WATCHDOG), "watchdog");
	ck_assert_str_eq(sbx_mechanism_name(SBX_MECH_CGROUP_V1), "cgroup_v1");
	ck_assert_str_eq(sbx_mechanism_name(SBX_MECH_CGROUP_V2), "cgroup_v2");
	ck_assert_ptr_nonnull(sbx_mechanism_name(SBX_MECH_UNSET));
	ck_assert_ptr_nonnull(sbx_mechanism_name((enum sbx_mechanism)77));
	ck_assert_ptr_nonnull(sbx_limit_name((enum sbx_limit)77));
	ck_assert_ptr_nonnull(sbx_hit_name((enum sbx_hit)77));
}
END_TEST

START_TEST(options_defaults)
{
	sbx_sandbox_options so;
	sbx_run_options ro;

	memset(&so, 0xa5, sizeof(so));
	memset(&ro, 0xa5, sizeof(ro));
	sbx_sandbox_options_init(&so);
	sbx_run_options_init(&ro);
	ck_assert_int_eq(so.backend, SBX_BACKEND_AUTO);
	ck_assert(!so.require_isolation);
	ck_assert_uint_eq(so.max_starting, 32);
	ck_assert_ptr_null(ro.argv);
	ck_assert_ptr_null(ro.shell);
	ck_assert_ptr_null(ro.cwd);
	ck_assert_ptr_null(ro.env);
	ck_assert_ptr_null(ro.stdin_data);
	ck_assert_uint_eq(ro.stdin_len, 0);
	ck_assert_double_eq(ro.timeout, 60.0);
	ck_assert_uint_eq(ro.max_output, 1024 * 1024);
	ck_assert(ro.on_output == NULL);
	ck_assert_ptr_null(ro.on_output_arg);
}
END_TEST

/* ------------------------------------------------------------ sandbox */

START_TEST(sandbox_passthrough)
{
	sbx_sandbox *sb = tu_sandbox(NULL, 0);

	ck_assert(!sbx_sandbox_isolated(sb));
	ck_assert_str_eq(sbx_sandbox_backend(sb), "passthrough");
	/* Making the sandbox registers nothing on the caller's loop that would
	 * keep it running by itself. */
	tu_sandbox_free();
	ck_assert_int_eq(event_base_get_num_events(tu_base, EVENT_BASE_COUNT_ADDED), 0);
}
END_TEST

START_TEST(sandbox_require_isolation_refuses_passthrough)
{
	sbx_policy *p = sbx_policy_new();
	sbx_sandbox_options so;
	sbx_sandbox *sb = NULL;
	sbx_error err = fresh_error();
	int rc;

	ck_assert_ptr_nonnull(p);
	sbx_sandbox_options_init(&so);
	so.backend = SBX_BACKEND_PASSTHROUGH;
	so.require_isolation = true;
	rc = sbx_sandbox_new(tu_base, p, &so, &sb, &err);
	ck_assert_int_eq(rc, SBX_ENOISOLATION);
	assert_refused(rc, &err, "require_isolation", NULL, NULL);
	ck_assert_ptr_null(sb);
	sbx_policy_free(p);
}
END_TEST

/* Impossible requests are refused with a sentence, and nothing is made. */
START_TEST(sandbox_new_refuses_bad_arguments)
{
	sbx_policy *p = sbx_policy_new();
	sbx_sandbox_options so;
	sbx_sandbox *sb = NULL;
	sbx_error err = fresh_error();

	ck_assert_ptr_nonnull(p);
	sbx_sandbox_options_init(&so);
	so.backend = SBX_BACKEND_PASSTHROUGH;
	assert_refused(sbx_sandbox_new(NULL, p, &so, &sb, &err), &err, "no base", NULL, NULL);
	ck_assert_ptr_null(sb);
	so.backend = (enum sbx_backend)99;
	err = fresh_error();
	assert_refused(sbx_sandbox_new(tu_base, p, &so, &sb, &err), &err, "backend 99", "99", NULL);
	ck_assert_ptr_null(sb);
	sbx_policy_free(p);
}
END_TEST

/* The caller's policy can be changed and freed at once: runs see the policy
 * as it was when the sandbox was made. */
START_TEST(sandbox_copies_policy)
{
	sbx_policy *p = sbx_policy_new();
	static const char *const argv[] = { "/bin/sh", "-c", "echo \"[$SBXCOPY]\"", NULL };
	sbx_run_options o;
	sbx_sandbox *sb;
	sbx_result *r;
	tu_call c;

	ck_assert_ptr_nonnull(p);
	ck_assert_int_eq(sbx_policy_set_env(p, "SBXCOPY=one", NULL), 0);
	sb = tu_sandbox(p, 0);
	ck_assert_int_eq(sbx_policy_set_env(p, "SBXCOPY=two", NULL), 0);
	sbx_policy_free(p);

	sbx_run_options_init(&o);
	o.argv = argv;
	r = tu_run(sb, &o, &c);
	ck_assert_msg(r->exited && r->exit_code == 0, "error %s", r->error ? r->error : "(none)");
	ck_assert_str_eq(r->out[SBX_STDOUT].data, "[one]\n");
	tu_call_done(&c);
}
END_TEST


/* ------------------------------------------------------------ narrowing */

/* The field-named refusal of |p| against |base|, or "" when it narrows. */
static const char *narrowing(const sbx_policy *base, const sbx_policy *p)
{
	static sbx_error err;
	int rc = sbx_policy_check_narrows(base, p, &err);
	if (rc == 0)
		return "";
	ck_assert_int_eq(rc, -EPERM);
	return err.message;
}

START_TEST(narrowing_allows_less_and_names_more)
{
	sbx_policy *base = sbx_policy_new();
	ck_assert_int_eq(sbx_policy_add_writable(base, "/srv/work", NULL), 0);
	ck_assert_int_eq(sbx_policy_add_deny_read(base, "/srv/work/secret", NULL), 0);
	ck_assert_int_eq(sbx_policy_set_memory(base, 1 << 30, NULL), 0);
	ck_assert_int_eq(sbx_policy_set_cpus(base, 1, NULL), 0);

	/* A copy is the same policy; fewer writable paths, more denied ones,
	 * lower limits and new limits all narrow. */
	sbx_policy *p = sbx_policy_copy(base);
	ck_assert_str_eq(narrowing(base, p), "");
	sbx_policy_clear_writable(p);
	ck_assert_int_eq(sbx_policy_add_writable(p, "/srv/work/sub", NULL), 0);
	ck_assert_int_eq(sbx_policy_add_deny_write(p, "/srv/work/sub/.env", NULL), 0);
	ck_assert_int_eq(sbx_policy_set_memory(p, 1 << 20, NULL), 0);
	ck_assert_int_eq(sbx_policy_set_cpus(p, 0.5, NULL), 0);
	ck_assert_int_eq(sbx_policy_set_processes(p, 10, NULL), 0);
	ck_assert_str_eq(narrowing(base, p), "");
	sbx_policy_free(p);

	/* A sibling with a common prefix is not inside. */
	p = sbx_policy_copy(base);
	ck_assert_int_eq(sbx_policy_add_writable(p, "/srv/workshop", NULL), 0);
	ck_assert_str_eq(narrowing(base, p),
	                 "writable: '/srv/workshop' is outside every writable path of the base policy");
	sbx_policy_free(p);

	p = sbx_policy_copy(base);
	ck_assert_int_eq(sbx_policy_set_cpus(p, 2, NULL), 0);
	ck_assert_str_eq(narrowing(base, p), "cpus: 2 is above the base policy's 1");
	sbx_policy_free(p);

	/* Dropping a denied path, the protected defaults or the network's
	 * absence is widening too. */
	p = sbx_policy_new();
	ck_assert_int_eq(sbx_policy_set_memory(p, 1 << 20, NULL), 0);
	ck_assert_int_eq(sbx_policy_set_cpus(p, 1, NULL), 0);
	ck_assert_str_eq(narrowing(base, p),
	                 "deny_read: '/srv/work/secret' of the base policy is missing");
	sbx_policy_free(p);

	p = sbx_policy_copy(base);
	sbx_policy_set_protect_defaults(p, false);
	ck_assert_str_eq(narrowing(base, p), "protect_defaults: the base policy keeps them on");
	sbx_policy_set_protect_defaults(p, true);
	ck_assert_int_eq(sbx_policy_set_network(p, SBX_NETWORK_FULL, NULL), 0);
	ck_assert_str_eq(narrowing(base, p), "network: 'full' is wider than the base policy's 'none'");
	sbx_policy_free(p);

	/* "kernel" can mean a per-process RLIMIT_AS in place of a tree-wide limit. */
	p = sbx_policy_copy(base);
	ck_assert_int_eq(sbx_policy_set_memory_strategy(p, SBX_MEMORY_KERNEL, NULL), 0);
	ck_assert_str_eq(narrowing(base, p), "memory_strategy: only the base policy's may be asked for");
	sbx_policy_free(p);

	p = sbx_policy_copy(base);
	ck_assert_int_eq(sbx_policy_allow_env(p, "AWS_SECRET_ACCESS_KEY", NULL), 0);
	ck_assert_str_eq(narrowing(base, p),
	                 "env: the base policy does not let 'AWS_SECRET_ACCESS_KEY' through");
	sbx_policy_free(p);
	sbx_policy_free(base);
}
END_TEST

static Suite *policy_suite(void)
{
	Suite *s = suite_create("policy");
	TCase *tc;

	tc = tu_tcase("size", TU_TIMEOUT);
	tcase_add_loop_test(tc, parse_size_accepts, 0, sizeof(good_sizes) / sizeof(good_sizes[0]));
	tcase_add_loop_test(tc, parse_size_refuses, 0, sizeof(bad_sizes) / sizeof(bad_sizes[0]));
	tcase_add_test(tc, parse_size_refuses_null_and_tolerates_null_error);
	suite_add_tcase(s, tc);

	tc = tu_tcase("policy", TU_TIMEOUT);
	tcase_add_loop_test(tc, policy_paths_refused, 0,
	                    sizeof(path_setters) / sizeof(path_setters[0]));
	tcase_add_test(tc, policy_paths_accepted);
	tcase_add_test(tc, policy_path_tilde_expanded_from_home);
	tcase_add_test(tc, policy_limits_refuse_zero_and_out_of_range);
	tcase_add_test(tc, policy_limits_accept_positive);
	tcase_add_test(tc, policy_env_validated);
	tcase_add_test(tc, free_functions_ignore_null);
	suite_add_tcase(s, tc);

	tc = tu_tcase("names", TU_TIMEOUT);
	tcase_add_test(tc, strerror_names_every_code);
	tcase_add_test(tc, enum_names_match_the_json_keys);
	tcase_add_test(tc, options_defaults);
	tcase_add_test(tc, narrowing_allows_less_and_names_more);
	suite_add_tcase(s, tc);

	tc = tu_tcase("sandbox", TU_TIMEOUT);
	tcase_add_test(tc, sandbox_passthrough);
	tcase_add_test(tc, sandbox_require_isolation_refuses_passthrough);
	tcase_add_test(tc, sandbox_new_refuses_bad_arguments);
	tcase_add_test(tc, sandbox_copies_policy);
	suite_add_tcase(s, tc);
	return s;
}

int main(int argc, char **argv)
{
	tu_init(argc, argv);
	return tu_run_suite(policy_suite());
}
