// Entry point of the `mxserve` binary: builds the subcommand tree and turns errors into exit codes.
#include <algorithm>
#include <cstdio>

#include "cli/commands.h"
#include "core/log.h"

namespace mx::cli {

void exit_on_error(const Status& st) {
  if (st.ok()) return;
  log_error("{}", st.message());
  throw CLI::RuntimeError(1);
}

}  // namespace mx::cli

int main(int argc, char** argv) {
  CLI::App app{"mxserve: inference engine and OpenAI-compatible server for gpt-oss"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "mxserve 0.1.0");
  mx::cli::register_run(app);
  mx::cli::register_info(app);
  mx::cli::register_make_demo(app);
  mx::cli::register_bench(app);
  mx::cli::register_tokenize(app);
  mx::cli::register_harmony(app);
  mx::cli::register_serve(app);
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
  return 0;
}
