// Tokenizer: loading of a Hugging Face tokenizer.json (byte-level BPE vocab, added tokens,
// pre-tokenizer regex) and encode / decode with tiktoken semantics: ranks = token ids, so the
// merges list (derived from those ranks for o200k) is not read.
#include "tokenizer/tokenizer.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <unordered_map>

#include "tokenizer/bpe.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/pretokenize.h"
#include "tokenizer/utf8.h"

namespace mx {

using json = nlohmann::json;

struct AddedToken {
  std::string content;
  int32_t id;
  bool special;  // special: matched in text only with SpecialTokens::Allow; else always
};

struct Tokenizer::Impl {
  RankTable ranks;                                // ordinary token bytes -> id
  std::vector<AddedToken> added;                  // sorted by content length, longest first
  std::unordered_map<std::string, int32_t> added_ids;
  std::string arena;                              // bytes of every id, concatenated
  std::vector<uint32_t> offsets;                  // id -> [offsets[id], offsets[id+1]) in arena
  std::vector<uint8_t> special;                   // id -> 1 when special
  std::shared_ptr<const Pretokenizer> pretok;
  bool any_plain_added = false;                   // some added token is not special
  std::array<bool, 256> first_byte{};             // bytes that start an added token
  int single_first_byte = -1;                     // the only such byte, when there is one

  void encode_ordinary(std::string_view text, std::vector<int32_t>& out, Status& st) const;
  // Earliest added token (longest on ties) at or after `from` that `special` allows; npos if none.
  size_t find_added(std::string_view text, size_t from, SpecialTokens mode, const AddedToken*& tok) const;
};

namespace {

Result<json> read_json(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  MX_CHECK(in.good(), "cannot open {}", path.string());
  std::stringstream ss;
  ss << in.rdbuf();
  // model.merges (446k pairs for o200k) is not needed: with tiktoken semantics the merge order is
  // the rank (id) of the merged token. Discarding it while parsing halves the load time.
  const json::parser_callback_t skip_merges = [](int depth, json::parse_event_t event, json& parsed) {
    return !(depth == 2 && event == json::parse_event_t::key && parsed == "merges");
  };
  json j = json::parse(ss.str(), skip_merges, /*allow_exceptions=*/false);
  MX_CHECK(!j.is_discarded(), "{} is not valid JSON", path.string());
  return j;
}

// The Split regex of the pre_tokenizer (directly or inside a Sequence); o200k when there is none.
Result<std::string> find_split_regex(const json& pre) {
  if (pre.is_null()) return std::string(kO200kPattern);
  const std::string type = pre.value("type", "");
  if (type == "Sequence") {
    for (const json& p : pre.value("pretokenizers", json::array())) {
      if (p.value("type", "") == "Split") return find_split_regex(p);
    }
    return std::string(kO200kPattern);
  }
  if (type == "Split") {
    const json& pat = pre.value("pattern", json::object());
    MX_CHECK(pat.contains("Regex") && pat["Regex"].is_string(), "pre_tokenizer Split without a Regex pattern");
    return pat["Regex"].get<std::string>();
  }
  return MX_ERROR("unsupported pre_tokenizer type '{}'", type);
}

// Vocab (byte-level strings -> ids) into the rank table and the id -> bytes list.
Status load_vocab(const json& model, Tokenizer::Impl& impl, std::vector<std::string>& bytes_of) {
  MX_CHECK(model.value("type", "BPE") == "BPE", "tokenizer model type '{}' is not BPE", model.value("type", ""));
  const auto vit = model.find("vocab");
  MX_CHECK(vit != model.end() && vit->is_object(), "tokenizer.json has no model.vocab object");
  impl.ranks.reserve(vit->size());
  for (auto it = vit->begin(); it != vit->end(); ++it) {
    MX_CHECK(it.value().is_number_integer(), "vocab entry '{}' has no integer id", it.key());
    const int64_t id = it.value().get<int64_t>();
    MX_CHECK(id >= 0 && id < (1 << 30), "vocab id {} out of range", id);
    MX_ASSIGN(std::string bytes, byte_level_to_bytes(it.key()));
    MX_CHECK(!bytes.empty(), "vocab has an empty token (id {})", id);
    MX_CHECK(impl.ranks.insert(bytes, int32_t(id)), "vocab has token '{}' twice", it.key());
    if (size_t(id) >= bytes_of.size()) bytes_of.resize(size_t(id) + 1);
    // Two tokens on one id would decode as whichever came last (found by fuzz_tokenizer_json).
    MX_CHECK(bytes_of[size_t(id)].empty(), "vocab id {} is given to two tokens", id);
    bytes_of[size_t(id)] = std::move(bytes);
  }
  for (int b = 0; b < 256; ++b) {
    const char c = char(b);
    MX_CHECK(impl.ranks.find(std::string_view(&c, 1)) != RankTable::kNone, "vocab lacks the single byte {:#04x}", b);
  }
  return ok_status();
}

Status load_added(const json& added, Tokenizer::Impl& impl, std::vector<std::string>& bytes_of,
                  std::vector<uint8_t>& is_special) {
  for (const json& t : added) {
    MX_CHECK(t.contains("id") && t.contains("content"), "added_tokens entry without id/content");
    AddedToken tok{t["content"].get<std::string>(), t["id"].get<int32_t>(), t.value("special", true)};
    MX_CHECK(tok.id >= 0 && !tok.content.empty(), "bad added token '{}' id {}", tok.content, tok.id);
    if (size_t(tok.id) >= bytes_of.size()) bytes_of.resize(size_t(tok.id) + 1);
    MX_CHECK(bytes_of[size_t(tok.id)].empty() || bytes_of[size_t(tok.id)] == tok.content,
             "added token '{}' takes id {} of another token", tok.content, tok.id);
    bytes_of[size_t(tok.id)] = tok.content;
    if (size_t(tok.id) >= is_special.size()) is_special.resize(size_t(tok.id) + 1, 0);
    is_special[size_t(tok.id)] = tok.special ? 1 : 0;
    impl.any_plain_added |= !tok.special;
    impl.added_ids[tok.content] = tok.id;
    impl.added.push_back(std::move(tok));
  }
  for (const AddedToken& t : impl.added) impl.first_byte[static_cast<unsigned char>(t.content[0])] = true;
  if (std::count(impl.first_byte.begin(), impl.first_byte.end(), true) == 1) {
    impl.single_first_byte = int(std::find(impl.first_byte.begin(), impl.first_byte.end(), true) - impl.first_byte.begin());
  }
  std::stable_sort(impl.added.begin(), impl.added.end(),
                   [](const AddedToken& a, const AddedToken& b) { return a.content.size() > b.content.size(); });
  return ok_status();
}

}  // namespace

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::~Tokenizer() = default;

Result<std::shared_ptr<const Tokenizer>> Tokenizer::load(const std::filesystem::path& tokenizer_json) {
  try {
    return load_checked(tokenizer_json);
  } catch (const json::exception& e) {  // a field of another type than the checks above expect
    return MX_ERROR("{}: a field has the wrong type ({})", tokenizer_json.string(), e.what());
  }
}

Result<std::shared_ptr<const Tokenizer>> Tokenizer::load_checked(const std::filesystem::path& tokenizer_json) {
  MX_ASSIGN(json j, read_json(tokenizer_json));
  auto impl = std::make_unique<Impl>();
  std::vector<std::string> bytes_of;
  std::vector<uint8_t> is_special;
  MX_CHECK(j.contains("model"), "{} has no 'model'", tokenizer_json.string());
  MX_TRY(load_vocab(j["model"], *impl, bytes_of).with_context(tokenizer_json.string()));
  MX_TRY(load_added(j.value("added_tokens", json::array()), *impl, bytes_of, is_special));
  MX_ASSIGN(std::string pattern, find_split_regex(j.value("pre_tokenizer", json())));
  MX_ASSIGN(impl->pretok, Pretokenizer::create(pattern));

  impl->offsets.reserve(bytes_of.size() + 1);
  for (const std::string& b : bytes_of) {
    impl->offsets.push_back(uint32_t(impl->arena.size()));
    impl->arena += b;
  }
  impl->offsets.push_back(uint32_t(impl->arena.size()));
  is_special.resize(bytes_of.size(), 0);
  impl->special = std::move(is_special);
  return std::shared_ptr<const Tokenizer>(new Tokenizer(std::move(impl)));
}

void Tokenizer::Impl::encode_ordinary(std::string_view text, std::vector<int32_t>& out, Status& st) const {
  if (!st.ok() || text.empty()) return;
  st = pretok->split(text, [&](std::string_view piece) {
    const int32_t whole = ranks.find(piece);
    if (whole != RankTable::kNone) out.push_back(whole);
    else bpe_encode(ranks, piece, out);
  });
}

size_t Tokenizer::Impl::find_added(std::string_view text, size_t from, SpecialTokens mode,
                                   const AddedToken*& tok) const {
  // Candidate positions are bytes that start some added token ('<' for gpt-oss: memchr).
  for (size_t at = from; at < text.size(); ++at) {
    if (single_first_byte >= 0) {
      const void* p = std::memchr(text.data() + at, single_first_byte, text.size() - at);
      if (!p) return std::string_view::npos;
      at = size_t(static_cast<const char*>(p) - text.data());
    } else if (!first_byte[static_cast<unsigned char>(text[at])]) {
      continue;
    }
    for (const AddedToken& t : added) {  // longest first
      if (t.special && mode != SpecialTokens::Allow) continue;
      if (text.substr(at).starts_with(t.content)) {
        tok = &t;
        return at;
      }
    }
  }
  return std::string_view::npos;
}

Result<std::vector<int32_t>> Tokenizer::encode(std::string_view text, SpecialTokens special) const {
  if (const auto bad = utf8_first_invalid(text)) {
    return MX_ERROR("input is not valid UTF-8: bad byte {:#04x} at byte offset {}", static_cast<unsigned char>(text[*bad]),
                    *bad);
  }
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 4);
  Status st;
  const bool match_added = special == SpecialTokens::Allow || impl_->any_plain_added;
  size_t from = 0;
  while (match_added) {
    const AddedToken* tok = nullptr;
    const size_t at = impl_->find_added(text, from, special, tok);
    if (at == std::string_view::npos) break;
    impl_->encode_ordinary(text.substr(from, at - from), out, st);
    out.push_back(tok->id);
    from = at + tok->content.size();
  }
  impl_->encode_ordinary(text.substr(from), out, st);
  MX_TRY(st);
  return out;
}

std::string Tokenizer::decode(std::span<const int32_t> ids) const {
  std::string out;
  for (int32_t id : ids) out += token_bytes(id);
  return out;
}

std::string_view Tokenizer::token_bytes(int32_t id) const {
  if (id < 0 || size_t(id) + 1 >= impl_->offsets.size()) return {};
  return std::string_view(impl_->arena).substr(impl_->offsets[id], impl_->offsets[id + 1] - impl_->offsets[id]);
}

std::optional<int32_t> Tokenizer::token_id(std::string_view token) const {
  if (auto it = impl_->added_ids.find(std::string(token)); it != impl_->added_ids.end()) return it->second;
  const int32_t r = impl_->ranks.find(token);
  if (r == RankTable::kNone) return std::nullopt;
  return r;
}

bool Tokenizer::is_special(int32_t id) const { return id >= 0 && size_t(id) < impl_->special.size() && impl_->special[id]; }

int32_t Tokenizer::vocab_size() const { return int32_t(impl_->offsets.size() - 1); }

}  // namespace mx
