/* commands.h - the `saga` subcommands, each defined in its own cmd_<name>.c. */
#pragma once

#include "cli.h"

extern const cli_cmd cli_cmd_info;
extern const cli_cmd cli_cmd_convert;
extern const cli_cmd cli_cmd_generate;
extern const cli_cmd cli_cmd_pagerank;
extern const cli_cmd cli_cmd_cc;
extern const cli_cmd cli_cmd_gcn;
extern const cli_cmd cli_cmd_partition;
extern const cli_cmd cli_cmd_hep;
extern const cli_cmd cli_cmd_mlp;
extern const cli_cmd cli_cmd_plot;
