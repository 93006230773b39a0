// safetensors parsing and validation (8-byte little-endian header length, JSON header, data).
#include "model/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <set>

#include <nlohmann/json.hpp>

namespace mx {
namespace {
constexpr uint64_t kMaxHeaderBytes = 100ull << 20;  // the format's own limit is 100 MB
}

Result<std::unique_ptr<SafetensorsFile>> SafetensorsFile::open(const std::filesystem::path& path) {
  std::unique_ptr<SafetensorsFile> f(new SafetensorsFile());
  f->path_ = path;
  const std::string p = path.string();
  const int fd = ::open(p.c_str(), O_RDONLY);
  MX_CHECK(fd >= 0, "{}: cannot open ({})", p, std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    return MX_ERROR("{}: cannot stat", p);
  }
  f->map_size_ = size_t(st.st_size);
  if (f->map_size_ < 8) {
    ::close(fd);
    return MX_ERROR("{}: file is truncated ({} bytes, no header)", p, f->map_size_);
  }
  void* m = ::mmap(nullptr, f->map_size_, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  MX_CHECK(m != MAP_FAILED, "{}: mmap failed ({})", p, std::strerror(errno));
  f->map_ = m;
  const auto* bytes = static_cast<const uint8_t*>(m);
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | bytes[i];
  MX_CHECK(header_len <= kMaxHeaderBytes, "{}: header length {} is implausible (corrupt file?)", p, header_len);
  MX_CHECK(8 + header_len <= f->map_size_, "{}: file is truncated (header of {} bytes, file of {} bytes)", p,
           header_len, f->map_size_);
  f->data_ = bytes + 8 + header_len;
  f->data_size_ = f->map_size_ - 8 - header_len;
  MX_TRY(f->parse_header(std::string_view(reinterpret_cast<const char*>(bytes + 8), header_len)));
  return f;
}

SafetensorsFile::~SafetensorsFile() {
  if (map_) ::munmap(map_, map_size_);
}

Status SafetensorsFile::parse_header(std::string_view header) {
  const std::string p = path_.string();
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(header);
  } catch (const nlohmann::json::exception& e) {
    return MX_ERROR("{}: header is not valid JSON ({})", p, e.what());
  }
  MX_CHECK(j.is_object(), "{}: header is not a JSON object", p);
  std::vector<const TensorInfo*> spans;
  for (auto& [name, v] : j.items()) {
    if (name == "__metadata__") continue;
    MX_CHECK(v.is_object(), "{}: tensor '{}': entry is not an object", p, name);
    MX_CHECK(v.contains("dtype") && v["dtype"].is_string(), "{}: tensor '{}': missing dtype", p, name);
    MX_CHECK(v.contains("shape") && v["shape"].is_array(), "{}: tensor '{}': missing shape", p, name);
    MX_CHECK(v.contains("data_offsets") && v["data_offsets"].is_array() && v["data_offsets"].size() == 2,
             "{}: tensor '{}': missing data_offsets", p, name);
    TensorInfo info;
    info.name = name;
    const std::string dt = v["dtype"].get<std::string>();
    const auto dtype = dtype_from_name(dt);
    MX_CHECK(dtype.has_value(), "{}: tensor '{}': unknown dtype '{}'", p, name, dt);
    info.dtype = *dtype;
    uint64_t numel = 1;
    for (const auto& d : v["shape"]) {
      MX_CHECK(d.is_number_unsigned() || (d.is_number_integer() && d.get<int64_t>() >= 0),
               "{}: tensor '{}': shape entries must be non-negative integers", p, name);
      info.shape.push_back(d.get<int64_t>());
      numel *= uint64_t(info.shape.back());
    }
    for (const auto& o : v["data_offsets"])
      MX_CHECK(o.is_number_unsigned() || (o.is_number_integer() && o.get<int64_t>() >= 0),
               "{}: tensor '{}': data_offsets must be non-negative integers", p, name);
    info.begin = v["data_offsets"][0].get<uint64_t>();
    info.end = v["data_offsets"][1].get<uint64_t>();
    MX_CHECK(info.begin <= info.end, "{}: tensor '{}': data_offsets [{}, {}] are reversed", p, name, info.begin,
             info.end);
    MX_CHECK(info.end <= data_size_, "{}: tensor '{}': data [{}, {}) extends past the end of the file ({} data bytes)",
             p, name, info.begin, info.end, data_size_);
    MX_CHECK(numel * dtype_size(info.dtype) == info.end - info.begin,
             "{}: tensor '{}': shape {} x {} needs {} bytes but its span holds {}", p, name,
             nlohmann::json(info.shape).dump(), dt, numel * dtype_size(info.dtype), info.end - info.begin);
    MX_CHECK(info.shape.size() <= 4, "{}: tensor '{}' has {} dims (at most 4 supported)", p, name, info.shape.size());
    tensors_[name] = std::move(info);
  }
  for (const auto& [name, info] : tensors_) spans.push_back(&info);
  std::sort(spans.begin(), spans.end(), [](auto* a, auto* b) { return a->begin < b->begin; });
  for (size_t i = 1; i < spans.size(); ++i)
    MX_CHECK(spans[i]->begin >= spans[i - 1]->end || spans[i - 1]->begin == spans[i - 1]->end,
             "{}: tensors '{}' and '{}' overlap", p, spans[i - 1]->name, spans[i]->name);
  return ok_status();
}

const TensorInfo* SafetensorsFile::find(const std::string& name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

Tensor SafetensorsFile::view(const TensorInfo& info) const {
  Tensor t;
  t.data = const_cast<uint8_t*>(data_ + info.begin);
  t.dtype = info.dtype;
  t.device = Device::CPU;
  t.ndim = int(info.shape.size());
  for (int i = 0; i < t.ndim; ++i) t.shape[size_t(i)] = info.shape[size_t(i)];
  return t;
}

Result<Checkpoint> Checkpoint::open(const std::filesystem::path& dir) {
  namespace fs = std::filesystem;
  Checkpoint c;
  const fs::path index = dir / "model.safetensors.index.json";
  std::vector<fs::path> files;
  std::map<std::string, std::string> weight_map;
  if (fs::exists(index)) {
    std::ifstream in(index);
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(in);
    } catch (const nlohmann::json::exception& e) {
      return MX_ERROR("{}: not valid JSON ({})", index.string(), e.what());
    }
    MX_CHECK(j.contains("weight_map") && j["weight_map"].is_object(), "{}: no weight_map object", index.string());
    std::set<std::string> shard_names;
    for (auto& [name, shard] : j["weight_map"].items()) {
      MX_CHECK(shard.is_string(), "{}: weight_map entry '{}' is not a file name", index.string(), name);
      weight_map[name] = shard.get<std::string>();
      shard_names.insert(shard.get<std::string>());
    }
    for (const auto& s : shard_names) {
      MX_CHECK(s.find('/') == std::string::npos && s != ".." , "{}: shard name '{}' is not a plain file name",
               index.string(), s);
      std::error_code ec;  // a name past NAME_MAX made exists() throw (fuzz_checkpoint_index)
      MX_CHECK(fs::exists(dir / s, ec), "{}: shard '{}' is missing from {}{}", index.string(), s, dir.string(),
               ec ? " (" + ec.message() + ")" : "");
      files.push_back(dir / s);
    }
  } else if (fs::exists(dir / "model.safetensors")) {
    files.push_back(dir / "model.safetensors");
  } else {
    // Unindexed shards: model-*.safetensors (other .safetensors files in the folder are not weights).
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir, ec)) {
      const std::string name = e.path().filename().string();
      if (e.is_regular_file() && name.starts_with("model") && e.path().extension() == ".safetensors")
        files.push_back(e.path());
    }
    MX_CHECK(!ec, "cannot list {}: {}", dir.string(), ec.message());
    std::sort(files.begin(), files.end());
    MX_CHECK(!files.empty(), "no model.safetensors, model.safetensors.index.json or model-*.safetensors in {}",
             dir.string());
  }
  for (const auto& f : files) {
    MX_ASSIGN(auto file, SafetensorsFile::open(f));
    for (const auto& [name, info] : file->tensors()) {
      if (!weight_map.empty()) {
        auto it = weight_map.find(name);
        if (it == weight_map.end() || it->second != f.filename().string()) continue;  // not this shard's
      }
      MX_CHECK(!c.entries_.count(name), "tensor '{}' appears in two files ({} and {})", name,
               c.entries_[name].file->path().string(), f.string());
      c.entries_[name] = Entry{file.get(), &info};
    }
    c.files_.push_back(std::move(file));
  }
  for (const auto& [name, shard] : weight_map)
    MX_CHECK(c.entries_.count(name), "tensor '{}' is listed in the index for '{}' but not found in that file", name,
             shard);
  return c;
}

const Checkpoint::Entry* Checkpoint::find(const std::string& name) const {
  auto it = entries_.find(name);
  return it == entries_.end() ? nullptr : &it->second;
}

uint64_t Checkpoint::total_bytes() const {
  uint64_t n = 0;
  for (const auto& [name, e] : entries_) n += e.info->end - e.info->begin;
  return n;
}

}  // namespace mx
