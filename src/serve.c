/* serve.c -- `sbx serve`: the msgpack wire protocol (DESIGN.md). */
#include "cli.h"

int cli_cmd_serve(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	cli_error("'serve' is not implemented yet");
	return CLI_EXIT_FAILURE;
}
