// Fuzz target: one safetensors file (8-byte header length, JSON header, data), opened the way a
// model load opens it; every tensor it admits is viewed and its first and last bytes are read
// (a span outside the mapping would crash).
#include "fuzz_util.h"
#include "model/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto path = mx::fuzz::scratch_dir() / "model.safetensors";
  mx::fuzz::write_file(path, std::string_view(reinterpret_cast<const char*>(data), size));
  auto f = mx::SafetensorsFile::open(path);
  if (!f.ok()) return 0;
  volatile uint8_t sink = 0;
  for (const auto& [name, info] : (*f)->tensors()) {
    FUZZ_CHECK(info.begin <= info.end && info.end <= (*f)->data_bytes());
    const mx::Tensor t = (*f)->view(info);
    const auto* bytes = static_cast<const uint8_t*>(t.data);
    if (info.end > info.begin) sink = sink + bytes[0] + bytes[info.end - info.begin - 1];
  }
  return 0;
}
