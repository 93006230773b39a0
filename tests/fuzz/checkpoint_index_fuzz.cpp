// Fuzz target: model.safetensors.index.json. The input is the index; the folder holds the two
// valid shards of tests/fixtures/models/tiny-sharded, so that an index can name them, name
// files that are missing, name the index itself, or reach outside the folder.
#include <cstdlib>
#include <filesystem>

#include "fuzz_util.h"
#include "model/safetensors.h"

namespace fs = std::filesystem;

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  // The source tree: where this was built, or MXSERVE_SOURCE_DIR (a binary run on another machine).
  const char* env = std::getenv("MXSERVE_SOURCE_DIR");
  const fs::path src = fs::path(env ? env : MXSERVE_SOURCE_DIR) / "tests/fixtures/models/tiny-sharded";
  for (const char* shard : {"model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"})
    fs::copy_file(src / shard, mx::fuzz::scratch_dir() / shard, fs::copy_options::overwrite_existing);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const fs::path dir = mx::fuzz::scratch_dir();
  mx::fuzz::write_file(dir / "model.safetensors.index.json", std::string_view(reinterpret_cast<const char*>(data), size));
  auto ckpt = mx::Checkpoint::open(dir);
  if (!ckpt.ok()) return 0;
  for (const auto& [name, e] : ckpt->entries()) {
    FUZZ_CHECK(e.file && e.info);
    FUZZ_CHECK(e.info->end <= e.file->data_bytes());
  }
  return 0;
}
