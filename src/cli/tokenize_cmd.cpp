// `mxserve tokenize`: reads the text, finds the tokenizer (find_tokenizer_file), prints the ids or
// the encode throughput.
#include "cli/tokenize_cmd.h"

#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_file.h"

namespace mx::cli {
namespace {

Result<std::string> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  MX_CHECK(in.good(), "cannot open {}", path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// --model names a folder (its tokenizer.json, else $MXSERVE_TOKENIZER) or the file itself.
Result<std::filesystem::path> tokenizer_path(const std::string& model) {
  const std::filesystem::path p(model);
  const bool folder = std::filesystem::is_directory(p);
  MX_ASSIGN(const auto found, find_tokenizer_file(folder ? TokenizerSearch{.model_dir = p}
                                                         : TokenizerSearch{.file = p, .file_flag = "--model"}));
  MX_CHECK(found, "{} has no tokenizer.json and ${} is not set", model, kTokenizerEnv);
  return *found;
}

Status time_encode(const Tokenizer& tok, const std::string& text, SpecialTokens special, int runs) {
  size_t n_tokens = 0;
  double best_s = 1e30;
  for (int r = 0; r < runs; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    MX_ASSIGN(std::vector<int32_t> ids, tok.encode(text, special));
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best_s = std::min(best_s, s);
    n_tokens = ids.size();
  }
  std::printf("{\"bytes\": %zu, \"tokens\": %zu, \"runs\": %d, \"best_seconds\": %.6f, \"mb_per_s\": %.2f}\n",
              text.size(), n_tokens, runs, best_s, double(text.size()) / 1e6 / best_s);
  return ok_status();
}

Status encode_and_print(const TokenizeFlags& args) {
  MX_CHECK(args.text_file.empty() != args.prompt.empty(), "give exactly one of --text-file and -p");
  MX_ASSIGN(const std::filesystem::path path, tokenizer_path(args.model));
  MX_ASSIGN(std::shared_ptr<const Tokenizer> tok, Tokenizer::load(path));
  std::string text = args.prompt;
  if (!args.text_file.empty()) {
    MX_ASSIGN(text, read_file(args.text_file));
  }
  const SpecialTokens special = args.allow_special ? SpecialTokens::Allow : SpecialTokens::AsText;
  if (args.bench_runs > 0) return time_encode(*tok, text, special, args.bench_runs);
  MX_ASSIGN(std::vector<int32_t> ids, tok->encode(text, special));
  std::string out = "[";
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i) out += ", ";
    out += std::to_string(ids[i]);
  }
  out += "]\n";
  std::fwrite(out.data(), 1, out.size(), stdout);
  return ok_status();
}

}  // namespace

Status tokenize(const TokenizeFlags& f) {
  return catch_exceptions("tokenize", [&] { return encode_and_print(f); });
}

Command register_tokenize(CLI::App& app) {
  auto args = std::make_shared<TokenizeFlags>();
  CLI::App* cmd = app.add_subcommand("tokenize", "Encode text with a model's tokenizer and print the ids as JSON");
  cmd->add_option("--model", args->model, "Model folder containing tokenizer.json, or a tokenizer.json path")
      ->required();
  cmd->add_option("--text-file", args->text_file, "Read the text to encode from this file (default: none)");
  cmd->add_option("-p,--prompt", args->prompt, "Text to encode (default: none)");
  cmd->add_flag("--allow-special", args->allow_special,
                "Turn special-token strings like <|start|> into their ids (default: encode them as text)");
  cmd->add_option("--bench", args->bench_runs,
                  "Instead of printing ids, encode the text this many times and print the best MB/s (default: 0)");
  return {.app = cmd, .run = [args] { return tokenize(*args); }};
}

}  // namespace mx::cli
