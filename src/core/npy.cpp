// .npy writer: magic, version 1.0, header dict padded to a multiple of 64 bytes, raw data.
#include "core/npy.h"

#include <fstream>

namespace mx {

Status write_npy_f32(const std::filesystem::path& path, std::span<const float> data, const std::vector<int64_t>& shape) {
  std::string dims;
  int64_t numel = 1;
  for (auto d : shape) {
    dims += fmt::format("{}, ", d);
    numel *= d;
  }
  if (shape.size() > 1) dims.resize(dims.size() - 2);
  MX_CHECK(size_t(numel) == data.size(), "npy: shape holds {} values, data has {}", numel, data.size());
  std::string header = fmt::format("{{'descr': '<f4', 'fortran_order': False, 'shape': ({}), }}", dims);
  while ((10 + header.size() + 1) % 64) header += ' ';
  header += '\n';
  std::ofstream out(path, std::ios::binary);
  MX_CHECK(out.good(), "cannot write {}", path.string());
  out.write("\x93NUMPY\x01\x00", 8);
  const uint16_t len = uint16_t(header.size());
  out.put(char(len & 0xff)).put(char(len >> 8));
  out.write(header.data(), std::streamsize(header.size()));
  out.write(reinterpret_cast<const char*>(data.data()), std::streamsize(data.size() * 4));
  MX_CHECK(out.good(), "error writing {}", path.string());
  return ok_status();
}

}  // namespace mx
