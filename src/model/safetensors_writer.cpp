// safetensors writer: header JSON padded with spaces to a multiple of 8, then the data.
#include "model/safetensors_writer.h"

#include <fstream>

#include <nlohmann/json.hpp>

namespace mx {

Status write_safetensors(const std::filesystem::path& path, const std::vector<TensorBlob>& tensors) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  header["__metadata__"] = {{"format", "pt"}};
  uint64_t offset = 0;
  for (const auto& t : tensors) {
    header[t.name] = {{"dtype", std::string(dtype_name(t.dtype))},
                      {"shape", t.shape},
                      {"data_offsets", {offset, offset + t.bytes.size()}}};
    offset += t.bytes.size();
  }
  std::string h = header.dump();
  while (h.size() % 8) h += ' ';
  std::ofstream out(path, std::ios::binary);
  MX_CHECK(out.good(), "cannot write {}", path.string());
  uint8_t len[8];
  for (int i = 0; i < 8; ++i) len[i] = uint8_t(uint64_t(h.size()) >> (8 * i));
  out.write(reinterpret_cast<const char*>(len), 8);
  out.write(h.data(), std::streamsize(h.size()));
  for (const auto& t : tensors) out.write(reinterpret_cast<const char*>(t.bytes.data()), std::streamsize(t.bytes.size()));
  MX_CHECK(out.good(), "error writing {}", path.string());
  return ok_status();
}

}  // namespace mx
