// `mxserve harmony render CASE.json` prints a fixture case's rendering (text with <|…|> markers,
// or token ids); `mxserve harmony parse CASE.json` prints the messages parsed from its input.
#pragma once

#include <array>
#include <string>

#include "cli/command.h"

namespace mx::cli {

enum class RenderFormat { Text, Ids };

struct HarmonyRenderFlags {
  std::string case_path;                     // a fixture case JSON (kind render_*)
  RenderFormat format = RenderFormat::Text;  // markers as text, or token ids
  std::string tokenizer;                     // for Ids; empty: $MXSERVE_TOKENIZER
};

struct HarmonyParseFlags {
  std::string case_path;  // a fixture case JSON (kind parse_completion / streaming_parse, or a parse_check)
  std::string tokenizer;  // empty: $MXSERVE_TOKENIZER
};

Status harmony_render(const HarmonyRenderFlags& f);
Status harmony_parse(const HarmonyParseFlags& f);
// `harmony` with its two subcommands: {render, parse}.
std::array<Command, 2> register_harmony(CLI::App& app);

}  // namespace mx::cli
