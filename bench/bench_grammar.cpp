// bench_grammar: the host cost of guided decoding over the gpt-oss vocabulary (201,088 ids): one
// token mask in typical JSON states, uncached (VocabTrie::allow_json); the masks of one decode step
// of N sequences (HarmonyConstraint: read the last token, then the next mask), on the calling thread
// or with a ThreadPool as the engine's; the trie's build.
// Usage: bench_grammar TOKENIZER_JSON
#include <benchmark/benchmark.h>

#include <cstdio>
#include <functional>

#include "core/parallel.h"
#include "grammar/harmony_constraint.h"
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
// tools/bench_serve.py --guided strings and simple.
const char* kStrings = R"({"type": "object", "additionalProperties": false, "required": ["name", "city"],
  "properties": {"name": {"type": "string", "maxLength": 24}, "city": {"type": "string", "maxLength": 24}}})";
const char* kSimple = R"({"type": "object", "additionalProperties": false, "required": ["ok", "count", "color", "ids"],
  "properties": {"ok": {"type": "boolean"}, "count": {"type": "integer", "minimum": 0, "maximum": 999},
  "color": {"enum": ["red", "green", "blue"]},
  "ids": {"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 99}, "maxItems": 4}}})";

const VocabTrie& vocab() {
  static auto v = VocabTrie::build(*g_tok, kVocab).value();
  return *v;
}

std::shared_ptr<const Schema> schema_of(const char* text) {
  return std::make_shared<Schema>(compile_schema(nlohmann::ordered_json::parse(text)).value());
}

// The mask after `prefix` of a document of `schema` (closing_budget as VocabTrie::allow_json).
void mask_after(benchmark::State& state, const char* schema, const char* prefix, int closing_budget = -1) {
  JsonMatcher m(schema_of(schema));
  Arena arena(1 << 16), scratch(1 << 16);
  MatchState s;
  if (!m.advance(m.start(arena), prefix, s, arena)) state.SkipWithError("prefix refused");
  int allowed = 0;
  for (auto _ : state) {
    TokenMask mask(kVocab);
    vocab().allow_json(m, s, scratch, mask, closing_budget);
    allowed = mask.count();
    benchmark::DoNotOptimize(mask.words.data());
  }
  state.counters["allowed"] = allowed;
}

void BM_MaskObjectStart(benchmark::State& s) { mask_after(s, kSchema, "{"); }
void BM_MaskInFreeString(benchmark::State& s) { mask_after(s, kSchema, R"({"name":"Al)"); }
void BM_MaskInInteger(benchmark::State& s) { mask_after(s, kSchema, R"({"name":"Al","age":1)"); }
void BM_MaskAfterArrayItem(benchmark::State& s) { mask_after(s, kSchema, R"({"name":"Al","age":12,"tags":["x")"); }
void BM_MaskInMaxLengthString(benchmark::State& s) { mask_after(s, kStrings, R"({"name":"Ada Lo)"); }
// 40 bytes of wrap-up left: each token is checked against what closing the document then takes.
void BM_MaskInMaxLengthStringNearEnd(benchmark::State& s) { mask_after(s, kStrings, R"({"name":"Ada Lo)", 40); }
void BM_VocabTrieBuild(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(VocabTrie::build(*g_tok, kVocab).value().get());
}
BENCHMARK(BM_MaskObjectStart)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_MaskInFreeString)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_MaskInInteger)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_MaskAfterArrayItem)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_MaskInMaxLengthString)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_MaskInMaxLengthStringNearEnd)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_VocabTrieBuild)->Unit(benchmark::kMillisecond);

// One decode step of N constrained sequences as the engine runs it: each reads its last token
// (accept), then gives the next draw's mask. The sequences write the same answer (reasoning budget
// 0, max_tokens 96 as bench_serve.py), each from its own offset; one that finishes starts again.
class Sequences {
 public:
  Sequences(const char* schema, const char* answer, int n) {
    HarmonyRule rule{.targets = {AnswerTarget{.header = "final", .schema = schema_of(schema)}},
                     .max_reasoning_tokens = 0, .max_tokens = 96};
    auto shared = std::shared_ptr<const VocabTrie>(&vocab(), [](const VocabTrie*) {});
    start_ = HarmonyConstraint::create(shared, rule).value();
    script_ = g_tok->encode(std::string("<|channel|>final<|message|>") + answer + "<|return|>", SpecialTokens::Allow).value();
    for (int i = 0; i < n; ++i) {
      seqs_.push_back(start_->fresh());
      at_.push_back(0);
      for (int k = 0; k < i % int(script_.size() - 1); ++k) read(size_t(i));
      seqs_.back()->next_mask(0);
    }
  }
  int size() const { return int(seqs_.size()); }
  void read(size_t i) {  // the next token of the script (the mask of the last draw allows it)
    if (at_[i] == script_.size()) seqs_[i] = start_->fresh(), at_[i] = 0;
    if (seqs_[i]->accept(script_[at_[i]]) != script_[at_[i]]) {
      std::fprintf(stderr, "bench_grammar: token %zu of the answer (%d) refused\n", at_[i], script_[at_[i]]);
      std::abort();
    }
    at_[i]++;
  }
  void mask(size_t i) { benchmark::DoNotOptimize(seqs_[i]->next_mask(0).data()); }

 private:
  std::unique_ptr<HarmonyConstraint> start_;
  std::vector<int32_t> script_;
  std::vector<std::unique_ptr<TokenConstraint>> seqs_;
  std::vector<size_t> at_;
};

// Arguments: N sequences, W mask workers besides the calling thread (0: all masks on it, one after
// another; as the engine's mask pool otherwise). Real time: the engine thread's wait.
void step_masks(benchmark::State& state, const char* schema, const char* answer) {
  Sequences seqs(schema, answer, int(state.range(0)));
  auto pool = state.range(1) > 0 ? std::make_unique<ThreadPool>(int(state.range(1))) : nullptr;
  const std::function<void(int64_t)> mask = [&](int64_t i) { seqs.mask(size_t(i)); };
  for (auto _ : state) {
    for (size_t i = 0; i < size_t(seqs.size()); ++i) seqs.read(i);
    if (pool) pool->run(seqs.size(), mask);
    else for (int64_t i = 0; i < seqs.size(); ++i) mask(i);
  }
}
void BM_StepMasksStrings(benchmark::State& s) {
  step_masks(s, kStrings, R"({"name":"Ada Lovelace, Østergård","city":"Zürich am See"})");
}
void BM_StepMasksSimple(benchmark::State& s) {
  step_masks(s, kSimple, R"({"ok":true,"count":412,"color":"green","ids":[3,14,15,92]})");
}
void step_args(benchmark::internal::Benchmark* b) {
  b->ArgNames({"seqs", "workers"})->Args({1, 0})->Args({8, 0})->Args({8, 8})->Args({64, 0})->Args({64, 2})->Args({64, 8});
  b->UseRealTime()->Unit(benchmark::kMillisecond);
}
BENCHMARK(BM_StepMasksStrings)->Apply(step_args);
BENCHMARK(BM_StepMasksSimple)->Apply(step_args);

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
