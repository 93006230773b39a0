// expand_args: -np / -tp rewritten, and `serve --config FILE.yaml` read as `name: value` lines.
#include "cli/args.h"

#include <algorithm>
#include <fstream>

namespace mx::cli {

Result<std::vector<std::string>> expand_args(std::vector<std::string> args) {
  for (auto& a : args)
    if (a == "-np") a = "--parallel";  // CLI11 takes one-letter short flags only
    else if (a == "-tp") a = "--tensor-parallel-size";
  auto it = std::find(args.begin(), args.end(), "--config");
  if (it == args.end() || it + 1 == args.end()) return args;
  const std::string path = *(it + 1);
  std::ifstream in(path);
  MX_CHECK(in.good(), "--config: cannot open {}", path);
  std::vector<std::string> from_file;
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (const auto hash = line.find('#'); hash != std::string::npos) line.erase(hash);
    const auto first = line.find_first_not_of(" \t\r");
    if (first == std::string::npos) continue;
    const auto colon = line.find(':');
    MX_CHECK(colon != std::string::npos, "{}:{}: expected `name: value`", path, n);
    auto trim = [](std::string x) {
      x.erase(0, x.find_first_not_of(" \t\r\"'"));
      x.erase(x.find_last_not_of(" \t\r\"'") + 1);
      return x;
    };
    std::string key = trim(line.substr(0, colon)), value = trim(line.substr(colon + 1));
    std::replace(key.begin(), key.end(), '_', '-');  // max_model_len and max-model-len both work
    if (value == "true" || value == "false") {
      if (value == "true") from_file.push_back("--" + key);
      continue;
    }
    from_file.push_back("--" + key);
    from_file.push_back(value);
  }
  // After the subcommand and before the user's own flags, so that those win.
  auto sub = std::find(args.begin(), args.end(), "serve");
  args.insert(sub == args.end() ? args.end() : sub + 1, from_file.begin(), from_file.end());
  return args;
}

}  // namespace mx::cli
