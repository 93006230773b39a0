// Demo model location and writer, shared by `make-demo`, `run` and `serve`.
#include "cli/demo_model.h"

#include "core/log.h"
#include "model/random_model.h"
#include "tokenizer/tokenizer_file.h"

namespace mx::cli {
namespace fs = std::filesystem;

Status write_demo_model(const fs::path& dir, uint64_t seed, const std::string& tokenizer) {
  MX_ASSIGN(const std::optional<fs::path> tok, find_tokenizer_file({.file = tokenizer}));
  RandomModelSpec spec;
  spec.seed = seed;
  MX_TRY(write_random_model(dir, spec));
  std::error_code ec;
  if (tok) fs::copy_file(*tok, dir / "tokenizer.json", fs::copy_options::overwrite_existing, ec);
  MX_CHECK(!ec, "cannot copy {} into {}: {}", tok->string(), dir.string(), ec.message());
  log_info("wrote the demo model to {} ({} layers, hidden {}, {} experts, vocab {}){}", dir.string(), spec.layers,
           spec.hidden, spec.experts, spec.vocab,
           tok ? "" : " without tokenizer.json (`mxserve make-demo --tokenizer FILE` or $MXSERVE_TOKENIZER gives it one)");
  return ok_status();
}

Result<std::string> demo_model_dir() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  const fs::path dir = (ec ? fs::current_path() : exe.parent_path()) / "demo-model";
  if (!fs::exists(dir / "config.json")) MX_TRY(write_demo_model(dir, 1234));
  return dir.string();
}

}  // namespace mx::cli
