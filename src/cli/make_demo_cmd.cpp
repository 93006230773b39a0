// `mxserve make-demo --out DIR`: writes the bundled demo model (tiny, random weights, the real
// gpt-oss format and the real tokenizer), so the pipeline runs with no GPU and no download.
#include "cli/commands.h"
#include "cli/demo_model.h"

namespace mx::cli {
namespace {

struct DemoFlags {
  std::string out, tokenizer;
  uint64_t seed = 1234;
};

Status make_demo(const DemoFlags& f) { return write_demo_model(f.out, f.seed, f.tokenizer); }

}  // namespace

void register_make_demo(CLI::App& app) {
  auto f = std::make_shared<DemoFlags>();
  auto* cmd = app.add_subcommand("make-demo", "Write the tiny random demo model in the gpt-oss checkpoint format");
  cmd->add_option("--out", f->out, "Output folder")->required();
  cmd->add_option("--tokenizer", f->tokenizer, "tokenizer.json to copy into the model folder; default: $MXSERVE_TOKENIZER");
  cmd->add_option("--seed", f->seed, "Random seed of the weights")->default_val(1234);
  cmd->callback([f] { exit_on_error(make_demo(*f)); });
}

}  // namespace mx::cli
