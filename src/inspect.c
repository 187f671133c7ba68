/*
 * inspect.c -- the subcommands that run nothing: `sbx wrap` prints the
 * sandboxed command line, `sbx caps` what this machine can enforce.
 */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include <event2/event.h>

#include "cli.h"

static int print_json_value(json_t *v)
{
	if (!v) {
		cli_error("out of memory while building the JSON output");
		return CLI_EXIT_FAILURE;
	}
	int rc = json_dumpf(v, stdout, JSON_INDENT(2));
	json_decref(v);
	if (rc < 0 || fputc('\n', stdout) == EOF || fflush(stdout) == EOF) {
		cli_error("cannot write the output");
		return CLI_EXIT_FAILURE;
	}
	return 0;
}

int cli_cmd_wrap(int argc, char **argv)
{
	struct cli_run cr;
	switch (cli_parse_run(argc, argv, &cr)) {
	case CLI_PARSE_HELP:
		return 0;
	case CLI_PARSE_FAILED:
		return CLI_EXIT_FAILURE;
	case CLI_PARSE_OK:
		break;
	}
	int status = CLI_EXIT_FAILURE;
	sbx_sandbox *sb = NULL;
	sbx_wrapped *w = NULL;
	sbx_error err;
	/* A sandbox needs a loop even when nothing will run on it. */
	struct event_base *base = event_base_new();
	if (!base) {
		cli_error("cannot create an event loop");
		goto out;
	}
	if (sbx_sandbox_new(base, cr.policy, &cr.sandbox, &sb, &err) < 0 ||
	    sbx_sandbox_wrap(sb, &cr.run, &w, &err) < 0) {
		cli_error("%s", err.message);
		goto out;
	}
	json_t *arr = json_array();
	for (size_t i = 0; arr && w->argv[i]; i++)
		if (json_array_append_new(arr, cli_json_text(w->argv[i], strlen(w->argv[i]))) < 0) {
			json_decref(arr);
			arr = NULL;
		}
	status = print_json_value(arr);
out:
	sbx_wrapped_free(w);
	sbx_sandbox_free(sb);
	if (base)
		event_base_free(base);
	cli_run_release(&cr);
	return status;
}

static json_t *caps_item(const sbx_caps_item *it, bool limit)
{
	json_t *o = json_object();
	if (!o)
		return NULL;
	if (limit)
		json_object_set_new(o, "mechanism", json_string(sbx_mechanism_name(it->mechanism)));
	json_object_set_new(o, limit ? "enforced" : "available", json_boolean(it->available));
	json_object_set_new(o, "detail", json_string(it->detail));
	return o;
}

static json_t *caps_group(const sbx_caps_item *v, unsigned n, bool limit)
{
	json_t *o = json_object();
	for (unsigned i = 0; o && i < n; i++)
		json_object_set_new(o, v[i].name, caps_item(&v[i], limit));
	return o;
}

static void print_group(const char *title, const sbx_caps_item *v, unsigned n, bool limit)
{
	printf("%s:\n", title);
	for (unsigned i = 0; i < n; i++) {
		const char *state = limit ? sbx_mechanism_name(v[i].mechanism)
		                          : v[i].available ? "yes" : "no";
		printf("  %-20s %-9s %s\n", v[i].name, state, v[i].detail);
	}
}

int cli_cmd_caps(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "backend", required_argument, NULL, 'b' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	bool json = false;
	enum sbx_backend backend = SBX_BACKEND_AUTO;
	int opt;
	opterr = 0;
	while ((opt = getopt_long(argc, argv, "+h", longopts, NULL)) != -1) {
		switch (opt) {
		case 'j':
			json = true;
			break;
		case 'b':
			if (cli_parse_backend(optarg, &backend) < 0)
				return CLI_EXIT_FAILURE;
			break;
		case 'h':
			printf("usage: sbx caps [--json] [--backend NAME]\n"
			       "Reports what this machine can enforce, without starting or creating "
			       "anything.\n");
			return 0;
		default:
			cli_error("unknown option '%s' for caps; try 'sbx caps --help'", argv[optind - 1]);
			return CLI_EXIT_FAILURE;
		}
	}
	if (optind < argc) {
		cli_error("caps takes no operands: '%s'", argv[optind]);
		return CLI_EXIT_FAILURE;
	}

	sbx_caps caps;
	int rc = sbx_caps_get(backend, &caps);
	if (rc < 0 && backend != SBX_BACKEND_AUTO) {
		cli_error("the backend asked for is not usable here");
		json = false;
	}
	if (json) {
		json_t *o = json_object();
		if (o) {
			json_object_set_new(o, "backend", caps.backend ? json_string(caps.backend) : json_null());
			json_object_set_new(o, "backends", caps_group(caps.backends, caps.nbackends, false));
			json_object_set_new(o, "features", caps_group(caps.features, caps.nfeatures, false));
			json_object_set_new(o, "limits",
			                    caps.backend ? caps_group(caps.limits, SBX_LIMIT_COUNT, true)
			                                 : json_object());
		}
		return print_json_value(o);
	}
	printf("backend auto would use: %s\n", caps.backend ? caps.backend : "none");
	print_group("backends", caps.backends, caps.nbackends, false);
	if (caps.backend) {
		print_group("policy", caps.features, caps.nfeatures, false);
		print_group("limits", caps.limits, SBX_LIMIT_COUNT, true);
	}
	return rc < 0 ? CLI_EXIT_FAILURE : 0;
}
