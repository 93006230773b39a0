// `mxserve make-demo`: its flags and the call to write_demo_model.
#include "cli/make_demo_cmd.h"

#include <CLI/CLI.hpp>

#include "cli/demo_model.h"

namespace mx::cli {

Status make_demo(const MakeDemoFlags& f) {
  return catch_exceptions("make-demo", [&] { return write_demo_model(f.out, f.seed, f.tokenizer); });
}

Command register_make_demo(CLI::App& app) {
  auto f = std::make_shared<MakeDemoFlags>();
  auto* cmd = app.add_subcommand("make-demo", "Write the tiny random demo model in the gpt-oss checkpoint format");
  cmd->add_option("--out", f->out, "Output folder")->required();
  cmd->add_option("--tokenizer", f->tokenizer, "tokenizer.json to copy into the model folder; default: $MXSERVE_TOKENIZER");
  cmd->add_option("--seed", f->seed, "Random seed of the weights")->default_val(1234);
  return {.app = cmd, .run = [f] { return make_demo(*f); }};
}

}  // namespace mx::cli
