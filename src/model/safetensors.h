// Read-only safetensors files over mmap, and a Checkpoint: every tensor of a model folder
// (one file, or shards listed by model.safetensors.index.json), looked up by name.
// Headers are validated fully before any tensor is used; errors name the file and the tensor.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"

namespace mx {

struct TensorInfo {
  std::string name;
  DType dtype = DType::U8;
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;  // byte span inside the data section
};

class SafetensorsFile {
 public:
  static Result<std::unique_ptr<SafetensorsFile>> open(const std::filesystem::path& path);
  ~SafetensorsFile();

  const std::filesystem::path& path() const { return path_; }
  const std::map<std::string, TensorInfo>& tensors() const { return tensors_; }
  const TensorInfo* find(const std::string& name) const;
  Tensor view(const TensorInfo& info) const;  // host view into the mapping
  uint64_t data_bytes() const { return data_size_; }

 private:
  SafetensorsFile() = default;
  Status parse_header(std::string_view header);

  std::filesystem::path path_;
  void* map_ = nullptr;
  size_t map_size_ = 0;
  const uint8_t* data_ = nullptr;
  uint64_t data_size_ = 0;
  std::map<std::string, TensorInfo> tensors_;
};

class Checkpoint {
 public:
  // Opens model.safetensors.index.json and its shards, or every *.safetensors in `dir`.
  static Result<Checkpoint> open(const std::filesystem::path& dir);

  struct Entry {
    const SafetensorsFile* file;
    const TensorInfo* info;
  };
  const Entry* find(const std::string& name) const;
  const std::map<std::string, Entry>& entries() const { return entries_; }
  uint64_t total_bytes() const;
  size_t num_files() const { return files_.size(); }

 private:
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, Entry> entries_;
};

}  // namespace mx
