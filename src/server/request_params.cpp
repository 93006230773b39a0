// Typed field access with OpenAI-style error messages ("'temperature' must be a number").
#include "server/request_params.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <random>
#include <cmath>

namespace mx::server {
namespace {

// Reads body[key] when present and not null; reports wrong types and ranges.
class Fields {
 public:
  explicit Fields(const Json& body) : body_(body) {}
  std::optional<ApiError> error;

  const Json* get(const char* key) const {
    auto it = body_.find(key);
    return it == body_.end() || it->is_null() ? nullptr : &*it;
  }
  void number(const char* key, double lo, double hi, float& out) {
    const Json* v = get(key);
    if (!v || error) return;
    if (!v->is_number()) return fail(key, "must be a number");
    const double x = v->get<double>();
    if (x < lo || x > hi) return fail(key, fmt::format("must be in [{}, {}], got {}", lo, hi, x));
    out = float(x);
  }
  void integer(const char* key, int64_t lo, int64_t hi, std::optional<int64_t>& out) {
    const Json* v = get(key);
    if (!v || error) return;
    if (!v->is_number_integer()) return fail(key, "must be an integer");
    const int64_t x = v->is_number_unsigned() && v->get<uint64_t>() > uint64_t(INT64_MAX) ? INT64_MAX : v->get<int64_t>();
    if (x < lo || x > hi) return fail(key, fmt::format("must be in [{}, {}], got {}", lo, hi, x));
    out = x;
  }
  void boolean(const char* key, bool& out) {
    const Json* v = get(key);
    if (!v || error) return;
    if (!v->is_boolean()) return fail(key, "must be a boolean");
    out = v->get<bool>();
  }
  // param: the top-level field ("stream_options" for "stream_options.include_usage").
  void fail(const char* key, const std::string& what) {
    const std::string_view k(key);
    if (!error) error = bad_request(fmt::format("'{}' {}", key, what), std::string(k.substr(0, k.find('.'))));
  }

 private:
  const Json& body_;
};

}  // namespace

int json_text_depth(std::string_view text, int limit) {
  int depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (const char ch : text) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (ch == '\\') escaped = true;
      else if (ch == '"') in_string = false;
      continue;
    }
    if (ch == '"') {
      in_string = true;
    } else if (ch == '[' || ch == '{') {
      deepest = std::max(deepest, ++depth);
      if (deepest > limit) return deepest;
    } else if ((ch == ']' || ch == '}') && depth > 0) {
      --depth;
    }
  }
  return deepest;
}

std::variant<Json, ApiError> parse_body(const std::string& text, int max_depth) {
  if (json_text_depth(text, max_depth) > max_depth)
    return bad_request(fmt::format("The request body nests arrays and objects deeper than {} levels.", max_depth));
  Json body = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (body.is_discarded()) return bad_request("The request body is not valid JSON.");
  if (!body.is_object()) return bad_request("The request body must be a JSON object.");
  return body;
}

std::optional<int32_t> token_id(const Json& x, int64_t vocab) {
  if (x.is_number_unsigned()) {
    if (x.get<uint64_t>() >= uint64_t(vocab)) return std::nullopt;
  } else if (!x.is_number_integer() || x.get<int64_t>() < 0 || x.get<int64_t>() >= vocab) {
    return std::nullopt;
  }
  return int32_t(x.get<int64_t>());
}

std::optional<ApiError> check_unsupported(const Json& body, Endpoint endpoint) {
  auto present = [&](const char* key) {
    auto it = body.find(key);
    return it != body.end() && !it->is_null() ? &*it : nullptr;
  };
  auto refuse = [](const char* key, const char* why) { return bad_request(fmt::format("'{}' is not supported: {}", key, why), key); };
  if (endpoint == Endpoint::Chat) {
    if (present("functions")) return refuse("functions", "describe functions in 'tools'");
    if (present("function_call")) return refuse("function_call", "use 'tool_choice'");
    if (present("text")) return refuse("text", "it is a /v1/responses parameter; use 'response_format'");
    if (present("audio")) return refuse("audio", "this model reads and writes text only");
    if (present("prediction")) return refuse("prediction", "predicted outputs are not implemented");
    if (const Json* m = present("modalities"); m && *m != Json::array({"text"}))
      return refuse("modalities", "this model writes text only (\"modalities\": [\"text\"])");
  } else if (endpoint == Endpoint::Completions) {
    if (const Json* s = present("suffix"); s && !(s->is_string() && s->get<std::string>().empty()))
      return refuse("suffix", "gpt-oss has no fill-in-the-middle mode");
    if (const Json* b = present("best_of")) {
      const Json* n = present("n");
      const int64_t want = n && n->is_number_integer() ? n->get<int64_t>() : 1;
      if (!b->is_number_integer() || b->get<int64_t>() != want)
        return refuse("best_of", "choices are not ranked; leave it out or equal to 'n'");
    }
  }
  return std::nullopt;
}

std::optional<ApiError> check_model(const Json& body, const std::string& served_name) {
  auto it = body.find("model");
  if (it == body.end() || it->is_null()) return std::nullopt;
  if (!it->is_string()) return bad_request("'model' must be a string", "model");
  if (it->get<std::string>() != served_name) return model_not_found(it->get<std::string>());
  return std::nullopt;
}

std::optional<ApiError> parse_sampling(const Json& body, Endpoint endpoint, SamplingRequest& out) {
  Fields f(body);
  SamplingParams& sp = out.params.sampling;
  sp.temperature = 1.0f;  // OpenAI's default
  f.number("temperature", 0, 2, sp.temperature);
  f.number("top_p", 1e-9, 1, sp.top_p);
  f.number("min_p", 0, 1, sp.min_p);
  f.number("presence_penalty", -2, 2, sp.presence_penalty);
  f.number("frequency_penalty", -2, 2, sp.frequency_penalty);
  f.number("repetition_penalty", 1e-3, 100, sp.repetition_penalty);  // vLLM's extension
  if (const Json* lb = f.get("logit_bias")) {  // {"token id": bias in [-100, 100]}
    if (!lb->is_object()) f.fail("logit_bias", "must be an object mapping token ids to numbers");
    else if (lb->size() > kMaxTokenListEntries)  // each entry is applied every step of the request
      f.fail("logit_bias", fmt::format("has {} entries; at most {} are accepted", lb->size(), kMaxTokenListEntries));
    else for (auto it = lb->begin(); it != lb->end() && !f.error; ++it) {
      int64_t id = -1;
      const std::string& key = it.key();
      const auto [end, ec] = std::from_chars(key.data(), key.data() + key.size(), id);
      if (ec != std::errc() || end != key.data() + key.size() || id < 0 || id > INT32_MAX)
        f.fail("logit_bias", fmt::format("key '{}' is not a token id", key));
      else if (!it.value().is_number() || std::abs(it.value().get<double>()) > 100)
        f.fail("logit_bias", fmt::format("the bias of token {} must be a number in [-100, 100]", id));
      else sp.logit_bias.emplace_back(int32_t(id), it.value().get<float>());
    }
  }
  std::optional<int64_t> v;
  f.integer("top_k", -1, 1 << 30, v);
  if (v) sp.top_k = int(std::max<int64_t>(*v, 0));
  v.reset();
  f.integer("seed", INT64_MIN, INT64_MAX, v);
  // Without a seed each request draws from its own random one (as OpenAI and vLLM do): two users
  // sending the same prompt do not get the same sample.
  sp.seed = v ? uint64_t(*v) : std::random_device{}() * 0x9e3779b97f4a7c15ull + std::random_device{}();
  const char* max_key = endpoint == Endpoint::Responses ? "max_output_tokens" : "max_tokens";
  f.integer(max_key, 1, INT32_MAX, out.max_tokens);
  if (endpoint == Endpoint::Chat) f.integer("max_completion_tokens", 1, INT32_MAX, out.max_tokens);
  v.reset();
  f.integer("min_tokens", 0, INT32_MAX, v);
  if (v) out.params.min_tokens = int(*v);
  v.reset();
  f.integer("n", 1, 16, v);
  if (v) out.n = int(*v);
  f.boolean("stream", out.stream);
  f.boolean("return_token_ids", out.return_token_ids);
  bool ignore_eos = false;
  f.boolean("ignore_eos", ignore_eos);
  out.params.ignore_eos = ignore_eos ? IgnoreEos::Yes : IgnoreEos::No;
  if (const Json* so = f.get("stream_options")) {
    if (!so->is_object()) f.fail("stream_options", "must be an object");
    else if (auto it = so->find("include_usage"); it != so->end() && !it->is_null()) {
      if (!it->is_boolean()) f.fail("stream_options.include_usage", "must be a boolean");
      else out.include_usage = it->get<bool>();
    }
  }
  if (const Json* s = f.get("stop")) {
    if (s->is_string()) out.stop.push_back(s->get<std::string>());
    else if (s->is_array()) {
      for (const Json& x : *s) {
        if (!x.is_string()) f.fail("stop", "must be a string or an array of strings");
        else if (!x.get<std::string>().empty()) out.stop.push_back(x.get<std::string>());
      }
    } else {
      f.fail("stop", "must be a string or an array of strings");
    }
  }
  if (const Json* s = f.get("stop_token_ids")) {
    if (!s->is_array()) f.fail("stop_token_ids", "must be an array of token ids");
    else if (s->size() > kMaxTokenListEntries)  // scanned at every sampled token
      f.fail("stop_token_ids", fmt::format("has {} entries; at most {} are accepted", s->size(), kMaxTokenListEntries));
    else for (const Json& x : *s) {
      const auto id = token_id(x, INT32_MAX);
      if (!id) f.fail("stop_token_ids", "must be an array of token ids (integers in [0, 2^31))");
      else out.params.stop_ids.push_back(*id);
    }
  }
  if (endpoint == Endpoint::Chat) {  // logprobs: bool, top_logprobs: 0..20
    bool want = false;
    f.boolean("logprobs", want);
    v.reset();
    f.integer("top_logprobs", 0, 20, v);
    if (v && !want) f.fail("top_logprobs", "needs 'logprobs': true");
    if (want) out.params.logprobs = int(v.value_or(0));
  } else if (endpoint == Endpoint::Completions) {  // logprobs: number of top alternatives
    v.reset();
    f.integer("logprobs", 0, 20, v);
    if (v) out.params.logprobs = int(*v);
  }
  if (out.params.min_tokens > 0 && out.max_tokens && out.params.min_tokens > *out.max_tokens)
    f.fail("min_tokens", "must not exceed max_tokens");
  return f.error;
}

}  // namespace mx::server
