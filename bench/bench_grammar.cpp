// bench_grammar: the host cost of one guided-decoding token mask over the gpt-oss vocabulary
// (201,088 ids) in typical JSON states, uncached (VocabTrie::allow_json), and the trie's build.
// Usage: bench_grammar TOKENIZER_JSON
#include <benchmark/benchmark.h>

#include <cstdio>

#include "grammar/vocab_trie.h"

namespace {

using namespace mx;
using namespace mx::grammar;

std::shared_ptr<const Tokenizer> g_tok;
constexpr int32_t kVocab = 201088;

const char* kSchema = R"({"type": "object", "properties": {
  "name": {"type": "string"}, "age": {"type": "integer", "minimum": 0, "maximum": 150},
  "tags": {"type": "array", "items": {"type": "string"}}}, "required": ["name", "age", "tags"],
  "additionalProperties": false})";

// The mask after `prefix` of a document of kSchema.
void mask_after(benchmark::State& state, const char* prefix) {
  static auto vocab = VocabTrie::build(*g_tok, kVocab).value();
  JsonMatcher m(std::make_shared<Schema>(compile_schema(nlohmann::ordered_json::parse(kSchema)).value()));
  Arena arena(1 << 16), scratch(1 << 16);
  MatchState s;
  if (!m.advance(m.start(arena), prefix, s, arena)) state.SkipWithError("prefix refused");
  int allowed = 0;
  for (auto _ : state) {
    TokenMask mask(kVocab);
    vocab->allow_json(m, s, scratch, mask);
    allowed = mask.count();
    benchmark::DoNotOptimize(mask.words.data());
  }
  state.counters["allowed"] = allowed;
}

void BM_MaskObjectStart(benchmark::State& s) { mask_after(s, "{"); }
void BM_MaskInFreeString(benchmark::State& s) { mask_after(s, R"({"name":"Al)"); }
void BM_MaskInInteger(benchmark::State& s) { mask_after(s, R"({"name":"Al","age":1)"); }
void BM_MaskAfterArrayItem(benchmark::State& s) { mask_after(s, R"({"name":"Al","age":12,"tags":["x")"); }
void BM_VocabTrieBuild(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(VocabTrie::build(*g_tok, kVocab).value().get());
}
BENCHMARK(BM_MaskObjectStart)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_MaskInFreeString)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_MaskInInteger)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_MaskAfterArrayItem)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_VocabTrieBuild)->Unit(benchmark::kMillisecond);

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (argc < 2) {
    std::fprintf(stderr, "usage: bench_grammar TOKENIZER_JSON [benchmark flags]\n");
    return 2;
  }
  auto tok = Tokenizer::load(argv[1]);
  if (!tok.ok()) {
    std::fprintf(stderr, "%s\n", tok.status().message().c_str());
    return 1;
  }
  g_tok = tok.value();
  benchmark::RunSpecifiedBenchmarks();
  return 0;
}
