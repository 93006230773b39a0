// `mxserve info`: the checkpoint opened, its tensors summed by dtype and checked against the
// gpt-oss layout (expected_tensors).
#include "cli/info_cmd.h"

#include <CLI/CLI.hpp>

#include <cstdio>
#include <map>

#include "model/config.h"
#include "model/model_path.h"
#include "model/safetensors.h"
#include "model/weights.h"

namespace mx::cli {
namespace {

Status print_info(const std::string& arg) {
  MX_ASSIGN(auto dir, resolve_model_path(arg));
  MX_ASSIGN(ModelConfig c, ModelConfig::load(dir / "config.json"));
  MX_ASSIGN(Checkpoint ckpt, Checkpoint::open(dir));
  std::printf("model folder         %s\n%s", dir.string().c_str(), c.summary().c_str());
  std::map<std::string, std::pair<int, uint64_t>> by_dtype;
  for (const auto& [name, e] : ckpt.entries()) {
    auto& [count, bytes] = by_dtype[std::string(dtype_name(e.info->dtype))];
    ++count;
    bytes += e.info->end - e.info->begin;
  }
  std::printf("checkpoint           %zu tensors in %zu file(s), %.3f GB\n", ckpt.entries().size(), ckpt.num_files(),
              double(ckpt.total_bytes()) / 1e9);
  for (const auto& [dt, cb] : by_dtype)
    std::printf("  %-6s %6d tensors %12.3f MB\n", dt.c_str(), cb.first, double(cb.second) / 1e6);
  std::printf("expected tensors:\n");
  int problems = 0;
  for (const auto& e : expected_tensors(c)) {
    const auto* entry = ckpt.find(e.name);
    const char* status = !entry ? "MISSING" : entry->info->dtype != e.dtype ? "WRONG DTYPE"
                                             : entry->info->shape != e.shape ? "WRONG SHAPE" : "";
    problems += *status != 0;
    if (*status || e.name.find("layers.") == std::string::npos || e.name.find("layers.0.") != std::string::npos)
      std::printf("  %-52s %-5s [%s] %s\n", e.name.c_str(), std::string(dtype_name(e.dtype)).c_str(),
                  fmt::format("{}", fmt::join(e.shape, ", ")).c_str(), status);
  }
  std::printf("  (layers 1..%d have the same tensors as layer 0)\n", c.num_hidden_layers - 1);
  MX_CHECK(problems == 0, "{} tensor(s) do not match the gpt-oss layout", problems);
  return ok_status();
}

}  // namespace

Status info(const InfoFlags& f) {
  return catch_exceptions("info", [&] { return print_info(f.model); });
}

Command register_info(CLI::App& app) {
  auto f = std::make_shared<InfoFlags>();
  auto* cmd = app.add_subcommand("info", "Print a model's config and tensor summary, checking every tensor");
  cmd->add_option("model", f->model, "Model folder or Hugging Face repo id")->required();
  return {.app = cmd, .run = [f] { return info(*f); }};
}

}  // namespace mx::cli
