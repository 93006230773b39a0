// Entry point of the `mxserve` binary: builds the subcommand tree and turns errors into exit codes.
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
  mx::cli::expand_aliases(argc, argv);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  return 0;
}
