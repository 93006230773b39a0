// Checkpoint loading: safetensors header validation, sharded index, the spec's tensor table
// (name, dtype, shape), config validation and model folder resolution — every error names what
// is wrong (a corrupted checkpoint under `mxserve run`: tests/cli/cli_run_test.cpp).
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <functional>

#include <nlohmann/json.hpp>

#include "model/model.h"
#include "model/model_path.h"
#include "model/random_model.h"
#include "model/safetensors_writer.h"
#include "test_util.h"

namespace mx {
namespace {

namespace fs = std::filesystem;

RandomModelSpec small_spec() {
  RandomModelSpec s;
  s.layers = 2;
  s.hidden = 32;
  s.intermediate = 64;
  s.heads = 2;
  s.kv_heads = 1;
  s.head_dim = 8;
  s.experts = 3;
  s.experts_per_token = 2;
  s.vocab = 50;
  return s;
}

// Writes a small model whose tensor list went through `mutate` first.
fs::path write_model(const std::string& name, const std::function<void(std::vector<TensorBlob>&)>& mutate) {
  const fs::path dir = test::temp_dir(name);
  EXPECT_TRUE(write_random_model(dir, small_spec()).ok());
  auto cfg = ModelConfig::load(dir / "config.json");
  std::vector<TensorBlob> blobs;
  for (const auto& e : expected_tensors(*cfg)) {
    int64_t n = 1;
    for (auto d : e.shape) n *= d;
    blobs.push_back({e.name, e.dtype, e.shape, std::vector<uint8_t>(size_t(n) * dtype_size(e.dtype), 0x3c)});
  }
  mutate(blobs);
  EXPECT_TRUE(write_safetensors(dir / "model.safetensors", blobs).ok());
  return dir;
}

// Writes a raw safetensors file with a given header text and data size.
void write_raw(const fs::path& path, const std::string& header, size_t data_bytes) {
  std::ofstream out(path, std::ios::binary);
  const uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out.put(char(n >> (8 * i)));
  out << header << std::string(data_bytes, '\0');
}

std::string load_error(const fs::path& dir) {
  auto m = Model::load(dir.string(), Device::CPU, ShowProgress::No);
  return m.ok() ? "" : m.status().message();
}

TEST(Loader, RandomModelLoads) {
  const fs::path dir = test::temp_dir("ok");
  ASSERT_TRUE(write_random_model(dir, small_spec()).ok());
  auto m = Model::load(dir.string(), Device::CPU, ShowProgress::No);
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ((*m)->weights.layers.size(), 2u);
  EXPECT_EQ((*m)->weights.layers[0].qkv_w.dim(0), 2 * 8 + 2 * 8);  // q rows + k rows + v rows
  EXPECT_EQ((*m)->weights.layers[0].experts.gate_up_blocks.dtype, DType::U8);  // kept 4-bit
}

TEST(Loader, MissingTensorIsNamed) {
  const auto dir = write_model("missing", [](auto& b) {
    std::erase_if(b, [](const TensorBlob& t) { return t.name == "model.layers.1.self_attn.sinks"; });
  });
  EXPECT_NE(load_error(dir).find("missing tensor 'model.layers.1.self_attn.sinks'"), std::string::npos)
      << load_error(dir);
}

TEST(Loader, WrongDtypeIsNamed) {
  const auto dir = write_model("dtype", [](auto& b) {
    for (auto& t : b)
      if (t.name == "model.norm.weight") {
        t.dtype = DType::F16;  // same byte size, wrong type
      }
  });
  const std::string err = load_error(dir);
  EXPECT_NE(err.find("'model.norm.weight'"), std::string::npos) << err;
  EXPECT_NE(err.find("dtype F16"), std::string::npos) << err;
}

TEST(Loader, WrongShapeIsNamed) {
  const auto dir = write_model("shape", [](auto& b) {
    for (auto& t : b)
      if (t.name == "model.layers.0.mlp.experts.down_proj_scales") {
        std::swap(t.shape[1], t.shape[2]);
      }
  });
  const std::string err = load_error(dir);
  EXPECT_NE(err.find("'model.layers.0.mlp.experts.down_proj_scales'"), std::string::npos) << err;
  EXPECT_NE(err.find("shape"), std::string::npos) << err;
}

TEST(Loader, TruncatedFileIsAnError) {
  const fs::path dir = test::temp_dir("trunc");
  ASSERT_TRUE(write_random_model(dir, small_spec()).ok());
  const auto size = fs::file_size(dir / "model.safetensors");
  fs::resize_file(dir / "model.safetensors", size / 2);
  const std::string err = load_error(dir);
  EXPECT_NE(err.find("past the end of the file"), std::string::npos) << err;
  fs::resize_file(dir / "model.safetensors", 5);
  EXPECT_NE(load_error(dir).find("truncated"), std::string::npos) << load_error(dir);
}

TEST(Safetensors, BadHeaderJson) {
  const fs::path f = test::temp_dir("json") / "model.safetensors";
  write_raw(f, "{\"a\": {\"dtype\": ", 0);
  auto r = SafetensorsFile::open(f);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("not valid JSON"), std::string::npos) << r.status().message();
}

TEST(Safetensors, OverlappingSpans) {
  const fs::path f = test::temp_dir("overlap") / "model.safetensors";
  write_raw(f,
            R"({"a": {"dtype": "BF16", "shape": [4], "data_offsets": [0, 8]},)"
            R"( "b": {"dtype": "BF16", "shape": [4], "data_offsets": [4, 12]}})",
            12);
  auto r = SafetensorsFile::open(f);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("'a' and 'b' overlap"), std::string::npos) << r.status().message();
}

TEST(Safetensors, SpanMustMatchShapeAndDtype) {
  const fs::path f = test::temp_dir("span") / "model.safetensors";
  write_raw(f, R"({"w": {"dtype": "BF16", "shape": [3, 2], "data_offsets": [0, 8]}})", 8);
  auto r = SafetensorsFile::open(f);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("tensor 'w'"), std::string::npos) << r.status().message();
  write_raw(f, R"({"w": {"dtype": "Q4_K", "shape": [4], "data_offsets": [0, 8]}})", 8);
  r = SafetensorsFile::open(f);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("unknown dtype 'Q4_K'"), std::string::npos) << r.status().message();
}

TEST(Loader, ShardedIndexAndMissingShard) {
  const fs::path dir = test::fixtures_dir() / "models" / "tiny-sharded";
  auto ck = Checkpoint::open(dir);
  ASSERT_TRUE(ck.ok()) << ck.status().message();
  EXPECT_EQ(ck->num_files(), 2u);
  // Copy the index and only the first shard: the second is missing.
  const fs::path broken = test::temp_dir("shard");
  fs::copy_file(dir / "model.safetensors.index.json", broken / "model.safetensors.index.json");
  fs::copy_file(dir / "model-00001-of-00002.safetensors", broken / "model-00001-of-00002.safetensors");
  fs::copy_file(dir / "config.json", broken / "config.json");
  const std::string err = load_error(broken);
  EXPECT_NE(err.find("shard 'model-00002-of-00002.safetensors' is missing"), std::string::npos) << err;
}

// Found by fuzz_checkpoint_index: a shard name longer than NAME_MAX made fs::exists throw, and
// the load ended in std::terminate instead of an error.
TEST(Loader, ShardNamePastNameMaxIsAnError) {
  const fs::path dir = test::temp_dir("longshard");
  std::ofstream(dir / "model.safetensors.index.json") << R"({"weight_map": {"w": ")" << std::string(300, 'a') << R"("}})";
  auto ck = Checkpoint::open(dir);
  ASSERT_FALSE(ck.ok());
  EXPECT_NE(ck.status().message().find("is missing"), std::string::npos) << ck.status().message();
}

TEST(Config, ValidationErrorsNameTheKey) {
  auto base = nlohmann::json::parse(random_model_config(small_spec()).dump());
  auto bad = base;
  bad["num_key_value_heads"] = 3;  // 2 heads are not a multiple of 3
  EXPECT_NE(ModelConfig::from_json(bad).status().message().find("num_key_value_heads"), std::string::npos);
  bad = base;
  bad["rope_scaling"]["rope_type"] = "linear";
  EXPECT_NE(ModelConfig::from_json(bad).status().message().find("rope_type"), std::string::npos);
  bad = base;
  bad["hidden_size"] = "wide";
  EXPECT_NE(ModelConfig::from_json(bad).status().message().find("'hidden_size' has the wrong type"), std::string::npos);
  bad = base;
  bad.erase("head_dim");
  EXPECT_NE(ModelConfig::from_json(bad).status().message().find("'head_dim' is missing"), std::string::npos);
  bad = base;
  bad["layer_types"].push_back("full_attention");
  EXPECT_NE(ModelConfig::from_json(bad).status().message().find("layer_types"), std::string::npos);
  EXPECT_TRUE(ModelConfig::from_json(base).ok());
}

// Integer keys (found by fuzz_config: a float past int's range was cast, undefined behaviour):
// out of range or fractional values are errors naming the key; integral floats are accepted.
TEST(Config, IntegerKeysAreRangeChecked) {
  auto base = nlohmann::json::parse(random_model_config(small_spec()).dump());
  for (const nlohmann::json v : {nlohmann::json(77777777777770.02), nlohmann::json(1e300), nlohmann::json(64.5),
                                 nlohmann::json(int64_t(1) << 40), nlohmann::json(uint64_t(1) << 63), nlohmann::json(-1e12)}) {
    auto bad = base;
    bad["intermediate_size"] = v;
    const auto r = ModelConfig::from_json(bad);
    ASSERT_FALSE(r.ok()) << v.dump();
    EXPECT_NE(r.status().message().find("'intermediate_size' must be an integer"), std::string::npos) << r.status().message();
  }
  auto whole = base;
  whole["intermediate_size"] = double(base["intermediate_size"].get<int>());  // 64.0: an integral float
  ASSERT_TRUE(ModelConfig::from_json(whole).ok());
  EXPECT_EQ(ModelConfig::from_json(whole)->intermediate_size, base["intermediate_size"].get<int>());
}

TEST(ModelPath, ResolvesHuggingFaceCache) {
  const fs::path cache = test::temp_dir("hub");
  const fs::path snap = cache / "models--openai--gpt-oss-20b" / "snapshots" / "abc123";
  fs::create_directories(snap);
  fs::create_directories(snap / "original");
  std::ofstream(snap / "config.json") << "{}";
  fs::create_directories(cache / "models--openai--gpt-oss-20b" / "refs");
  std::ofstream(cache / "models--openai--gpt-oss-20b" / "refs" / "main") << "abc123";
  ::setenv("HF_HUB_CACHE", cache.c_str(), 1);
  auto p = resolve_model_path("openai/gpt-oss-20b");
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(*p, snap);
  auto missing = resolve_model_path("openai/gpt-oss-120b");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find(cache.string()), std::string::npos) << missing.status().message();
  ::unsetenv("HF_HUB_CACHE");
}

}  // namespace
}  // namespace mx
