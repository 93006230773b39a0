// Subcommands of the `mxserve` binary. Each register_* adds one subcommand with its flags and
// help text; its callback throws CLI::RuntimeError(code) on failure so that only main exits.
#pragma once

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

#include "core/status.h"

namespace mx::cli {

void register_run(CLI::App& app);
void register_info(CLI::App& app);
void register_make_demo(CLI::App& app);
void register_bench(CLI::App& app);
void register_tokenize(CLI::App& app);
void register_harmony(CLI::App& app);
void register_serve(CLI::App& app);
// Rewrites llama-server's "-np" to "--parallel" (CLI11 takes one-letter short names only).
// Rewrites the command line before parsing: `-np` -> `--parallel`, and the flags of a
// `serve --config FILE.yaml` inserted after `serve` (so that explicit flags win).
Result<std::vector<std::string>> expand_args(std::vector<std::string> args);

// Logs the error and throws CLI::RuntimeError(1) when st is not ok.
void exit_on_error(const Status& st);

// The value of a flag's parse, or exit_on_error with its error.
template <typename T>
T value_or_exit(Result<T> r) {
  if (!r.ok()) exit_on_error(r.status());
  return std::move(r).value();
}

}  // namespace mx::cli
