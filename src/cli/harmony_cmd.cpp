// `mxserve harmony render|parse`: a fixture case read, rendered or parsed, and printed.
#include "cli/harmony_cmd.h"

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <filesystem>
#include <iostream>

#include "tokenizer/harmony_json.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_file.h"

namespace mx::cli {

namespace {

namespace fs = std::filesystem;

// --tokenizer, else $MXSERVE_TOKENIZER (find_tokenizer_file; a case has no model folder).
Result<std::shared_ptr<const Tokenizer>> load_tokenizer(const std::string& flag) {
  MX_ASSIGN(const std::optional<fs::path> path, find_tokenizer_file({.file = flag}));
  MX_CHECK(path, "no tokenizer.json: pass --tokenizer PATH or set {}", kTokenizerEnv);
  return Tokenizer::load(*path);
}

std::string ids_json(const std::vector<int32_t>& ids) {
  std::string out = "[";
  for (size_t i = 0; i < ids.size(); ++i) out += fmt::format("{}{}", i ? ", " : "", ids[i]);
  return out + "]\n";
}

Status render(const HarmonyRenderFlags& args) {
  MX_ASSIGN(harmony::ojson c, harmony::read_json_file(args.case_path));
  MX_ASSIGN(harmony::Rendered rendered, harmony::render_case(c));
  if (args.format == RenderFormat::Text) {
    std::cout << rendered.str() << std::flush;  // exact bytes, no newline added
    return ok_status();
  }
  MX_ASSIGN(auto tok, load_tokenizer(args.tokenizer));
  MX_ASSIGN(std::vector<int32_t> ids, rendered.tokens(*tok));
  std::cout << ids_json(ids);
  return ok_status();
}

Status parse(const HarmonyParseFlags& args) {
  MX_ASSIGN(harmony::ojson c, harmony::read_json_file(args.case_path));
  MX_CHECK(c.is_object(), "{}: a case must be a JSON object", args.case_path);
  // Parse kinds carry input/options; a render case may carry a parse_check with both.
  const harmony::ojson* holder = &c;
  if (!c.contains("input") && c.contains("parse_check")) holder = &c["parse_check"];
  MX_CHECK(holder->is_object() && holder->contains("input"), "{}: no 'input' to parse", args.case_path);
  const harmony::ojson options = holder->contains("options") ? (*holder)["options"] : harmony::ojson::object();
  MX_ASSIGN(auto tok, load_tokenizer(args.tokenizer));
  MX_ASSIGN(harmony::ParseCase pc, harmony::parse_case_input((*holder)["input"], options, tok.get()));
  MX_ASSIGN(std::vector<harmony::Message> messages, harmony::parse_tokens(tok, pc.ids, pc.options, pc.eos));
  std::cout << harmony::messages_to_json(messages).dump(2, ' ', /*ensure_ascii=*/false,
                                                         nlohmann::json::error_handler_t::replace)
            << "\n";
  return ok_status();
}

}  // namespace

Status harmony_render(const HarmonyRenderFlags& f) {
  return catch_exceptions("harmony render", [&] { return render(f); });
}

Status harmony_parse(const HarmonyParseFlags& f) {
  return catch_exceptions("harmony parse", [&] { return parse(f); });
}

std::array<Command, 2> register_harmony(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand("harmony", "Harmony chat format: render and parse fixture cases");
  cmd->require_subcommand(1);

  auto render_args = std::make_shared<HarmonyRenderFlags>();
  CLI::App* render_cmd = cmd->add_subcommand("render", "Print the rendering of a harmony case (fixture JSON format)");
  render_cmd->add_option("case", render_args->case_path, "Case JSON file (kind render_*)")->required()->check(CLI::ExistingFile);
  render_cmd->add_option("--format", render_args->format, "Output: text (markers as <|start|> ...) or ids (token ids)")
      ->transform(CLI::CheckedTransformer(std::map<std::string, RenderFormat>{{"text", RenderFormat::Text},
                                                                              {"ids", RenderFormat::Ids}}))
      ->default_str("text");
  render_cmd->add_option("--tokenizer", render_args->tokenizer, "tokenizer.json for --format ids (default: $MXSERVE_TOKENIZER)");

  auto parse_args = std::make_shared<HarmonyParseFlags>();
  CLI::App* parse_cmd = cmd->add_subcommand("parse", "Parse a harmony case's input token ids and print the messages as JSON");
  parse_cmd->add_option("case", parse_args->case_path, "Case JSON file (kind parse_completion / streaming_parse)")
      ->required()
      ->check(CLI::ExistingFile);
  parse_cmd->add_option("--tokenizer", parse_args->tokenizer, "tokenizer.json (default: $MXSERVE_TOKENIZER)");
  return {Command{.app = render_cmd, .run = [render_args] { return harmony_render(*render_args); }},
          Command{.app = parse_cmd, .run = [parse_args] { return harmony_parse(*parse_args); }}};
}

}  // namespace mx::cli
