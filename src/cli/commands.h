// The subcommands of the `mxserve` binary, each a library function returning Status (mx_cli):
// run, info, make-demo, bench, tokenize, harmony render|parse, serve. Each register_* adds its
// subcommand, flags and help text to a CLI::App and returns the Command that main runs.
#pragma once

#include "cli/args.h"
#include "cli/bench_cmd.h"
#include "cli/command.h"
#include "cli/harmony_cmd.h"
#include "cli/info_cmd.h"
#include "cli/make_demo_cmd.h"
#include "cli/run_cmd.h"
#include "cli/serve_cmd.h"
#include "cli/tokenize_cmd.h"
