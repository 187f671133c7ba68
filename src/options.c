/*
 * options.c -- the options of `sbx run`, turned into a policy, sandbox
 * options and run options.  Every value is checked here or by the library
 * setter it goes to, and a refusal quotes the value as the user typed it.
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"

/* Longer than any sane run; it also keeps the value far from time_t overflow. */
#define MAX_TIMEOUT_SECONDS 1e9

enum {
	OPT_WRITABLE = 256,
	OPT_DENY_WRITE,
	OPT_DENY_READ,
	OPT_NETWORK,
	OPT_MEMORY,
	OPT_MAX_FILE_SIZE,
	OPT_CPUS,
	OPT_CPU_SECONDS,
	OPT_PROCESSES,
	OPT_OPEN_FILES,
	OPT_MEMORY_STRATEGY,
	OPT_TIMEOUT,
	OPT_MAX_OUTPUT,
	OPT_ENV,
	OPT_STDIN,
	OPT_INPUT,
	OPT_BACKEND,
	OPT_REQUIRE_ISOLATION,
	OPT_JSON,
};

static const struct option run_options[] = {
	{"workspace", required_argument, NULL, 'w'},
	{"writable", required_argument, NULL, OPT_WRITABLE},
	{"deny-write", required_argument, NULL, OPT_DENY_WRITE},
	{"deny-read", required_argument, NULL, OPT_DENY_READ},
	{"network", required_argument, NULL, OPT_NETWORK},
	{"memory", required_argument, NULL, OPT_MEMORY},
	{"max-file-size", required_argument, NULL, OPT_MAX_FILE_SIZE},
	{"cpus", required_argument, NULL, OPT_CPUS},
	{"cpu-seconds", required_argument, NULL, OPT_CPU_SECONDS},
	{"processes", required_argument, NULL, OPT_PROCESSES},
	{"open-files", required_argument, NULL, OPT_OPEN_FILES},
	{"memory-strategy", required_argument, NULL, OPT_MEMORY_STRATEGY},
	{"timeout", required_argument, NULL, OPT_TIMEOUT},
	{"max-output", required_argument, NULL, OPT_MAX_OUTPUT},
	{"env", required_argument, NULL, OPT_ENV},
	{"stdin", required_argument, NULL, OPT_STDIN},
	{"input", required_argument, NULL, OPT_INPUT},
	{"backend", required_argument, NULL, OPT_BACKEND},
	{"require-isolation", no_argument, NULL, OPT_REQUIRE_ISOLATION},
	{"json", no_argument, NULL, OPT_JSON},
	{"help", no_argument, NULL, 'h'},
	{NULL, 0, NULL, 0},
};

/*
 * "+" stops at the first operand, so nothing after "--" or after the program
 * name is ever taken for an option of ours; ":" lets us word the error for a
 * missing value ourselves.
 */
static const char run_optstring[] = "+:w:c:h";

void cli_print_run_options(FILE *f)
{
	fputs("Options of run and wrap:\n"
	      "  -w, --workspace DIR      writable working directory, never deleted\n"
	      "  -c COMMAND               run COMMAND with /bin/sh -c instead of a program\n"
	      "      --writable DIR       another writable directory (repeatable)\n"
	      "      --deny-write PATH    stays read-only even inside a writable one (repeatable)\n"
	      "      --deny-read PATH     unreadable (repeatable)\n"
	      "      --network none|full  network access (default none)\n"
	      "      --memory SIZE        memory limit: 512M, 1.5G, 65536 (K M G T are powers of 1024)\n"
	      "      --max-file-size SIZE  largest file the command may write\n"
	      "      --cpus N             share of cores (0.5 is half of one)\n"
	      "      --cpu-seconds N      CPU time limit\n"
	      "      --processes N        process limit\n"
	      "      --open-files N       open file limit\n"
	      "      --memory-strategy auto|kernel|watchdog|none   (default auto)\n"
	      "      --timeout SECONDS    wall-clock limit; 0 means none (default 60)\n"
	      "      --max-output SIZE    bytes kept per stream (default 1M)\n"
	      "      --env NAME=VALUE     set a variable (repeatable)\n"
	      "      --stdin FILE         feed FILE to the command's stdin\n"
	      "      --input TEXT         feed TEXT to the command's stdin\n"
	      "      --backend auto|native|bwrap|landlock|passthrough   (default auto)\n"
	      "      --require-isolation  refuse to run unisolated\n"
	      "      --json               print the result as JSON instead of the output\n"
	      "  -h, --help               print this help\n",
	      f);
}

void cli_error(const char *fmt, ...)
{
	va_list ap;

	fputs("sbx: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

/* A word an option accepts, and the enum value it stands for. */
struct choice {
	const char *word;
	int value;
};

static const struct choice network_choices[] = {
	{"none", SBX_NETWORK_NONE},
	{"full", SBX_NETWORK_FULL},
	{NULL, 0},
};

static const struct choice strategy_choices[] = {
	{"auto", SBX_MEMORY_AUTO},
	{"kernel", SBX_MEMORY_KERNEL},
	{"watchdog", SBX_MEMORY_WATCHDOG},
	{"none", SBX_MEMORY_NONE},
	{NULL, 0},
};

static const struct choice backend_choices[] = {
	{"auto", SBX_BACKEND_AUTO},
	{"native", SBX_BACKEND_NATIVE},
	{"bwrap", SBX_BACKEND_BWRAP},
	{"landlock", SBX_BACKEND_LANDLOCK},
	{"passthrough", SBX_BACKEND_PASSTHROUGH},
	{NULL, 0},
};

static int parse_choice(const char *opt, const char *text, const struct choice *choices,
                        int *out)
{
	const struct choice *c;

	for (c = choices; c->word; c++) {
		if (strcmp(text, c->word) == 0) {
			*out = c->value;
			return 0;
		}
	}
	fprintf(stderr, "sbx: %s '%s' is not one of", opt, text);
	for (c = choices; c->word; c++)
		fprintf(stderr, "%s %s", c == choices ? "" : ",", c->word);
	fputc('\n', stderr);
	return -1;
}

/*
 * A positive decimal integer.  strtoull alone would accept leading blanks, a
 * sign (and negate "-5" into a huge value) and trailing junk, so the first
 * character must be a digit and the last one parsed the end of the text.
 */
int cli_parse_backend(const char *text, enum sbx_backend *out)
{
	int choice;
	if (parse_choice("--backend", text, backend_choices, &choice) < 0)
		return -1;
	*out = (enum sbx_backend)choice;
	return 0;
}

static int parse_count(const char *opt, const char *text, uint64_t *out)
{
	unsigned long long v;
	char *end;

	if (!isdigit((unsigned char)text[0]))
		goto bad;
	errno = 0;
	v = strtoull(text, &end, 10);
	if (*end != '\0')
		goto bad;
	if (errno == ERANGE) {
		cli_error("%s '%s' is too large", opt, text);
		return -1;
	}
	if (v == 0) {
		cli_error("%s '%s' must be at least 1", opt, text);
		return -1;
	}
	*out = v;
	return 0;
bad:
	cli_error("%s '%s' is not a positive whole number", opt, text);
	return -1;
}

/*
 * A non-negative decimal number of at most |max| (the setter it goes to may
 * have bounds of its own).  The leading-digit rule keeps out what strtod would
 * also take: signs, blanks, "inf", "nan" and hexadecimal.
 */
static int parse_number(const char *opt, const char *text, bool zero_ok, double max,
                        double *out)
{
	double v;
	char *end;

	if (!isdigit((unsigned char)text[0]) &&
	    !(text[0] == '.' && isdigit((unsigned char)text[1])))
		goto bad;
	errno = 0;
	v = strtod(text, &end);
	if (*end != '\0' || (text[0] == '0' && (text[1] == 'x' || text[1] == 'X')))
		goto bad;
	if (errno == ERANGE || !isfinite(v)) {
		cli_error("%s '%s' is out of range", opt, text);
		return -1;
	}
	if (v > max) {
		cli_error("%s '%s' is more than %.0f", opt, text, max);
		return -1;
	}
	if (v == 0 && !zero_ok) {
		cli_error("%s '%s' must be more than 0", opt, text);
		return -1;
	}
	*out = v;
	return 0;
bad:
	cli_error("%s '%s' is not a number", opt, text);
	return -1;
}

/* A size for sbx_parse_size(), except that "0" is allowed where |zero_ok|. */
static int parse_size(const char *opt, const char *text, bool zero_ok, uint64_t *out)
{
	sbx_error err;

	if (zero_ok && strcmp(text, "0") == 0) {
		*out = 0;
		return 0;
	}
	if (sbx_parse_size(text, opt, out, &err) < 0) {
		cli_error("%s", err.message);
		return -1;
	}
	return 0;
}

/* Reads all of |path| into a new buffer; the caller frees *out. */
static int read_file(const char *path, char **out, size_t *len)
{
	char *buf = NULL, *bigger;
	size_t size = 0, used = 0;
	ssize_t n;
	int fd, saved;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	for (;;) {
		if (used == size) {
			size = size ? size * 2 : 65536;
			bigger = realloc(buf, size);
			if (!bigger) {
				saved = ENOMEM;
				goto fail;
			}
			buf = bigger;
		}
		n = read(fd, buf + used, size - used);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			saved = errno;
			goto fail;
		}
		if (n == 0)
			break;
		used += (size_t)n;
	}
	close(fd);
	*out = buf;
	*len = used;
	return 0;
fail:
	free(buf);
	close(fd);
	return -saved;
}

/* The workspace must be an existing directory; it becomes writable and the cwd. */
static int set_workspace(struct cli_run *cr, const char *dir)
{
	struct stat st;
	sbx_error err;

	cr->cwd = realpath(dir, NULL);
	if (!cr->cwd) {
		cli_error("workspace '%s': %s", dir, strerror(errno));
		return -1;
	}
	if (stat(cr->cwd, &st) < 0 || !S_ISDIR(st.st_mode)) {
		cli_error("workspace '%s' is not a directory", dir);
		return -1;
	}
	if (sbx_policy_add_writable(cr->policy, cr->cwd, &err) < 0) {
		cli_error("%s", err.message);
		return -1;
	}
	cr->run.cwd = cr->cwd;
	return 0;
}

/*
 * The option getopt_long just refused, as the user wrote it.  glibc leaves
 * optopt 0 for an unknown long option and has then moved past it; an unknown
 * short one may sit inside a cluster such as "-jx", so it is named by its
 * letter.  An option missing its value was the last word, so that is it.
 */
static const char *refused_option(int code, char **argv, char shortopt[3])
{
	if (code == '?' && optopt != 0) {
		shortopt[0] = '-';
		shortopt[1] = (char)optopt;
		shortopt[2] = '\0';
		return shortopt;
	}
	return argv[optind - 1];
}

/* Applies one parsed option; returns -1 after printing why it is refused. */
static int apply_option(struct cli_run *cr, int opt, const char *arg, const char **workspace,
                        bool *have_input)
{
	sbx_error err;
	uint64_t n;
	double d;
	int rc = 0, choice;

	switch (opt) {
	case 'w':
		*workspace = arg;
		return 0;
	case 'c':
		cr->run.shell = arg;
		return 0;
	case OPT_WRITABLE:
		rc = sbx_policy_add_writable(cr->policy, arg, &err);
		break;
	case OPT_DENY_WRITE:
		rc = sbx_policy_add_deny_write(cr->policy, arg, &err);
		break;
	case OPT_DENY_READ:
		rc = sbx_policy_add_deny_read(cr->policy, arg, &err);
		break;
	case OPT_NETWORK:
		if (parse_choice("--network", arg, network_choices, &choice) < 0)
			return -1;
		rc = sbx_policy_set_network(cr->policy, (enum sbx_network)choice, &err);
		break;
	case OPT_MEMORY:
		if (parse_size("--memory", arg, false, &n) < 0)
			return -1;
		rc = sbx_policy_set_memory(cr->policy, n, &err);
		break;
	case OPT_MAX_FILE_SIZE:
		if (parse_size("--max-file-size", arg, false, &n) < 0)
			return -1;
		rc = sbx_policy_set_file_size(cr->policy, n, &err);
		break;
	case OPT_CPUS:
		if (parse_number("--cpus", arg, false, DBL_MAX, &d) < 0)
			return -1;
		rc = sbx_policy_set_cpus(cr->policy, d, &err);
		break;
	case OPT_CPU_SECONDS:
		if (parse_count("--cpu-seconds", arg, &n) < 0)
			return -1;
		rc = sbx_policy_set_cpu_seconds(cr->policy, n, &err);
		break;
	case OPT_PROCESSES:
		if (parse_count("--processes", arg, &n) < 0)
			return -1;
		rc = sbx_policy_set_processes(cr->policy, n, &err);
		break;
	case OPT_OPEN_FILES:
		if (parse_count("--open-files", arg, &n) < 0)
			return -1;
		rc = sbx_policy_set_open_files(cr->policy, n, &err);
		break;
	case OPT_MEMORY_STRATEGY:
		if (parse_choice("--memory-strategy", arg, strategy_choices, &choice) < 0)
			return -1;
		rc = sbx_policy_set_memory_strategy(cr->policy, (enum sbx_memory_strategy)choice,
		                                    &err);
		break;
	case OPT_TIMEOUT:
		if (parse_number("--timeout", arg, true, MAX_TIMEOUT_SECONDS, &d) < 0)
			return -1;
		cr->run.timeout = d;
		return 0;
	case OPT_MAX_OUTPUT:
		if (parse_size("--max-output", arg, true, &n) < 0)
			return -1;
		if (n > SIZE_MAX) {
			cli_error("--max-output '%s' is too large", arg);
			return -1;
		}
		cr->run.max_output = (size_t)n;
		return 0;
	case OPT_ENV:
		rc = sbx_policy_set_env(cr->policy, arg, &err);
		break;
	case OPT_STDIN:
		if (*have_input) {
			cli_error("give only one of --stdin and --input, once");
			return -1;
		}
		*have_input = true;
		rc = read_file(arg, &cr->stdin_buf, &cr->run.stdin_len);
		if (rc < 0) {
			cli_error("--stdin '%s': %s", arg, strerror(-rc));
			return -1;
		}
		cr->run.stdin_data = cr->stdin_buf;
		return 0;
	case OPT_INPUT:
		if (*have_input) {
			cli_error("give only one of --stdin and --input, once");
			return -1;
		}
		*have_input = true;
		cr->run.stdin_data = arg;
		cr->run.stdin_len = strlen(arg);
		return 0;
	case OPT_BACKEND:
		if (parse_choice("--backend", arg, backend_choices, &choice) < 0)
			return -1;
		cr->sandbox.backend = (enum sbx_backend)choice;
		return 0;
	case OPT_REQUIRE_ISOLATION:
		cr->sandbox.require_isolation = true;
		return 0;
	case OPT_JSON:
		cr->json = true;
		return 0;
	}
	if (rc < 0) {
		cli_error("%s", err.message);
		return -1;
	}
	return 0;
}

/* The help of `run` and `wrap`, which take no options of their own. */
static int run_help(int opt, const char *arg, void *ctx)
{
	(void)opt;
	(void)arg;
	(void)ctx;
	printf("usage: sbx run [OPTIONS] -- PROGRAM [ARG...]\n"
	       "       sbx run [OPTIONS] -c 'SHELL COMMAND'\n\n");
	cli_print_run_options(stdout);
	return 0;
}

/*
 * Parses the options of run and those of |extra| (NULL: none; values at
 * least CLI_EXTRA_OPTION, given to |apply_extra|, which also gets 'h' for
 * --help).  The two tables are joined so getopt_long sees every option at
 * once and knows which of them take a value.  On CLI_PARSE_OK, optind is at
 * the first operand and *workspace is the -w value (or NULL).
 */
static enum cli_parse parse_options(int argc, char **argv, const struct option *extra,
                                    int (*apply_extra)(int opt, const char *arg, void *ctx),
                                    void *ctx, struct cli_run *cr, const char **workspace)
{
	enum { NRUN = sizeof(run_options) / sizeof(run_options[0]) - 1, MAX_EXTRA = 16 };
	struct option all[NRUN + MAX_EXTRA + 1];
	bool have_input = false;
	char shortopt[3];
	size_t n = 0, i;
	int opt, rc;

	memset(cr, 0, sizeof(*cr));
	*workspace = NULL;
	sbx_sandbox_options_init(&cr->sandbox);
	sbx_run_options_init(&cr->run);
	for (i = 0; i < NRUN; i++)
		all[n++] = run_options[i];
	for (i = 0; extra && i < MAX_EXTRA && extra[i].name; i++)
		all[n++] = extra[i];
	memset(&all[n], 0, sizeof(all[n]));
	cr->policy = sbx_policy_new();
	if (!cr->policy) {
		cli_error("out of memory");
		return CLI_PARSE_FAILED;
	}

	opterr = 0;
	optind = 1;
	while ((opt = getopt_long(argc, argv, run_optstring, all, NULL)) != -1) {
		switch (opt) {
		case '?':
			cli_error("unknown option '%s'; try 'sbx %s --help'",
			          refused_option(opt, argv, shortopt), argv[0]);
			goto fail;
		case ':':
			cli_error("option '%s' needs a value", refused_option(opt, argv, shortopt));
			goto fail;
		case 'h':
			apply_extra(opt, NULL, ctx);
			cli_run_release(cr);
			return CLI_PARSE_HELP;
		default:
			rc = opt >= CLI_EXTRA_OPTION ? apply_extra(opt, optarg, ctx)
			                             : apply_option(cr, opt, optarg, workspace, &have_input);
			if (rc < 0)
				goto fail;
		}
	}
	return CLI_PARSE_OK;
fail:
	cli_run_release(cr);
	return CLI_PARSE_FAILED;
}

enum cli_parse cli_parse_run(int argc, char **argv, struct cli_run *cr)
{
	const char *workspace;
	enum cli_parse parsed = parse_options(argc, argv, NULL, run_help, NULL, cr, &workspace);
	if (parsed != CLI_PARSE_OK)
		return parsed;

	if (cr->run.shell && optind < argc) {
		cli_error("give either -c 'COMMAND' or a program after '--', not both");
		goto fail;
	}
	if (!cr->run.shell && optind == argc) {
		cli_error("no program to run: give one after '--', or a command with -c");
		goto fail;
	}
	if (!cr->run.shell)
		cr->run.argv = (const char *const *)&argv[optind];

	/* Without -w, `run` works in a private workspace its session makes
	 * (and `wrap`, whose command outlives us, in our own directory). */
	if (workspace && set_workspace(cr, workspace) < 0)
		goto fail;
	return CLI_PARSE_OK;
fail:
	cli_run_release(cr);
	return CLI_PARSE_FAILED;
}

void cli_run_release(struct cli_run *cr)
{
	sbx_policy_free(cr->policy);
	free(cr->cwd);
	free(cr->stdin_buf);
	memset(cr, 0, sizeof(*cr));
}

/* The options of run plus |extra|, and no operands: `sbx serve`. */
enum cli_parse cli_parse_base(int argc, char **argv, const struct option *extra,
                              int (*apply_extra)(int opt, const char *arg, void *ctx), void *ctx,
                              struct cli_run *cr)
{
	const char *workspace;
	enum cli_parse parsed = parse_options(argc, argv, extra, apply_extra, ctx, cr, &workspace);
	if (parsed != CLI_PARSE_OK)
		return parsed;
	if (optind < argc) {
		cli_error("'sbx %s' takes no operands: '%s'", argv[0], argv[optind]);
		goto fail;
	}
	if (workspace && set_workspace(cr, workspace) < 0)
		goto fail;
	return CLI_PARSE_OK;
fail:
	cli_run_release(cr);
	return CLI_PARSE_FAILED;
}
