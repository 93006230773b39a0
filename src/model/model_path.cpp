// Model folder resolution: local path first, then the HF hub cache layout
// models--org--name/refs/main -> snapshots/<revision>/ (the root checkpoint; original/ is ignored).
#include "model/model_path.h"

#include <cstdlib>
#include <fstream>
#include <vector>

namespace mx {
namespace fs = std::filesystem;
namespace {

std::vector<fs::path> hub_cache_dirs() {
  std::vector<fs::path> dirs;
  if (const char* c = std::getenv("HF_HUB_CACHE"); c && *c) dirs.emplace_back(c);
  if (const char* h = std::getenv("HF_HOME"); h && *h) dirs.push_back(fs::path(h) / "hub");
  if (const char* home = std::getenv("HOME"); home && *home) dirs.push_back(fs::path(home) / ".cache/huggingface/hub");
  return dirs;
}

// Snapshot folder of a repo inside one cache dir, or empty.
fs::path find_snapshot(const fs::path& cache, const std::string& repo_id) {
  std::string folder = "models--" + repo_id;
  for (size_t p = folder.find('/'); p != std::string::npos; p = folder.find('/')) folder.replace(p, 1, "--");
  const fs::path repo = cache / folder;
  std::error_code ec;
  if (!fs::is_directory(repo, ec)) return {};
  std::ifstream ref(repo / "refs" / "main");
  std::string rev;
  if (ref && std::getline(ref, rev) && !rev.empty() && fs::is_directory(repo / "snapshots" / rev, ec))
    return repo / "snapshots" / rev;
  // No refs/main: accept a single snapshot.
  std::vector<fs::path> snaps;
  for (const auto& e : fs::directory_iterator(repo / "snapshots", ec))
    if (e.is_directory()) snaps.push_back(e.path());
  return snaps.size() == 1 ? snaps[0] : fs::path();
}

}  // namespace

Result<fs::path> resolve_model_path(const std::string& arg) {
  MX_CHECK(!arg.empty(), "no model given");
  std::error_code ec;
  const fs::path local(arg);
  if (fs::is_directory(local, ec)) {
    MX_CHECK(fs::exists(local / "config.json"), "{} has no config.json: not a Hugging Face model folder", arg);
    return local;
  }
  MX_CHECK(!fs::exists(local, ec), "{} is a file; pass the model folder that holds config.json", arg);
  const bool looks_like_repo = arg.find('/') != std::string::npos && arg.front() != '/' && arg.front() != '.' &&
                               arg.find("//") == std::string::npos;
  std::string looked = fmt::format("  local folder {}\n", fs::absolute(local).string());
  if (looks_like_repo) {
    for (const auto& cache : hub_cache_dirs()) {
      const fs::path snap = find_snapshot(cache, arg);
      if (!snap.empty()) {
        MX_CHECK(fs::exists(snap / "config.json"), "{}: snapshot {} has no config.json", arg, snap.string());
        return snap;
      }
      looked += fmt::format("  Hugging Face cache {}\n", cache.string());
    }
  }
  return MX_ERROR("model '{}' not found. Looked in:\n{}Download it first (e.g. `hf download {}`) or pass a local folder.",
                  arg, looked, looks_like_repo ? arg : "openai/gpt-oss-20b");
}

}  // namespace mx
