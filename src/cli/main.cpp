// Entry point of the `mxserve` binary: builds the subcommand tree, runs the chosen command and
// turns its Status into the exit code — the only place that decides one.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <vector>

#include "cli/commands.h"
#include "core/log.h"

int main(int argc, char** argv) {
  CLI::App app{"mxserve: inference engine and OpenAI-compatible server for gpt-oss"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "mxserve 0.1.0");
  std::vector<mx::cli::Command> commands = {mx::cli::register_run(app), mx::cli::register_info(app),
                                            mx::cli::register_make_demo(app), mx::cli::register_bench(app),
                                            mx::cli::register_tokenize(app)};
  for (mx::cli::Command& c : mx::cli::register_harmony(app)) commands.push_back(std::move(c));
  commands.push_back(mx::cli::register_serve(app));
  auto args = mx::cli::expand_args(std::vector<std::string>(argv + 1, argv + argc));
  if (!args.ok()) {
    mx::log_error("{}", args.status().message());
    return 2;
  }
  std::reverse(args->begin(), args->end());  // CLI11 takes a vector in reverse order
  try {
    app.parse(*args);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  for (const mx::cli::Command& c : commands) {
    if (!c.app->parsed()) continue;
    const mx::Status st = c.run();
    if (st.ok()) return 0;
    mx::log_error("{}", st.message());
    return 1;
  }
  return 0;
}
