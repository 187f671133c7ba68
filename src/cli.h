/*
 * cli.h -- what the parts of the sbx program share: the parsed options of
 * `run` (and later `wrap` and `serve`), the JSON form of a result, and the
 * exit statuses DESIGN.md fixes.
 */
#ifndef SBX_CLI_H
#define SBX_CLI_H

#include <stdbool.h>
#include <stdio.h>

#include <jansson.h>

#include "sbx.h"

/* Exit statuses of `sbx run` besides the command's own. */
enum {
	CLI_EXIT_TIMEOUT = 124,
	CLI_EXIT_FAILURE = 125,     /* sbx itself failed: bad option, no sandbox */
	CLI_EXIT_CANNOT_RUN = 126,  /* the program exists but cannot be run */
	CLI_EXIT_NOT_FOUND = 127,
	CLI_EXIT_SIGNAL_BASE = 128, /* plus the signal that ended the command */
};

/* Everything the options of `run` describe. */
struct cli_run {
	sbx_policy *policy;           /* owned */
	sbx_sandbox_options sandbox;
	sbx_run_options run;          /* argv and shell borrow main's argv */
	bool json;                    /* print the result object, not the output */
	char *cwd;                    /* owned: the workspace's real path, or NULL */
	char *stdin_buf;              /* owned: the bytes of --stdin FILE, or NULL */
};

enum cli_parse {
	CLI_PARSE_OK,     /* *cr is filled; release it with cli_run_release() */
	CLI_PARSE_HELP,   /* help was printed; nothing to release */
	CLI_PARSE_FAILED, /* an error was printed; nothing to release */
};

/*
 * Parses the options and operands of `run`; argv[0] is the subcommand's name.
 * Every error is printed as one "sbx: ..." line naming the bad value.
 */
enum cli_parse cli_parse_run(int argc, char **argv, struct cli_run *cr);
void cli_run_release(struct cli_run *cr);

/*
 * The options of run plus |extra| (a getopt_long table whose values are at
 * least CLI_EXTRA_OPTION, ended by a zero entry), and no operands: the base
 * policy of `sbx serve`.  |apply_extra| gets each extra option (and 'h' for
 * --help, with a NULL value, to print the usage) and returns -1 after
 * printing why it refuses one.
 */
#define CLI_EXTRA_OPTION 1024
struct option;
enum cli_parse cli_parse_base(int argc, char **argv, const struct option *extra,
                              int (*apply_extra)(int opt, const char *arg, void *ctx), void *ctx,
                              struct cli_run *cr);

/* Prints the option table of `run` and `wrap`. */
void cli_print_run_options(FILE *f);

/* Parses a --backend value; prints the error and returns -1 when unknown. */
int cli_parse_backend(const char *text, enum sbx_backend *out);

/* `sbx wrap` and `sbx caps` (inspect.c). */
int cli_cmd_wrap(int argc, char **argv);
int cli_cmd_caps(int argc, char **argv);

/* `sbx bench` (bench.c). */
int cli_cmd_bench(int argc, char **argv);

/* `sbx serve` (serve.c). */
int cli_cmd_serve(int argc, char **argv);

/* |len| bytes as a JSON string, invalid UTF-8 replaced by U+FFFD. */
json_t *cli_json_text(const char *data, size_t len);

/* The result as DESIGN.md's JSON object; NULL when out of memory. */
json_t *cli_result_json(const sbx_result *r);

/* Prints "sbx: MESSAGE" and a newline on stderr. */
void cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif /* SBX_CLI_H */
