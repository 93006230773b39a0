// JsonMatcher: the byte steps of each frame type. Frame fields by type:
//   Value  node, ws, depth                 — a value of `node` is next
//   Object stage 0 after '{', 1 after a key, 2 after a value, 3 after ','; a: next declared
//          property, b: the node of the value after the key
//   Key    node: the object; a..b: the declared properties it may name; c: trie node
//   Array  stage 0 after '[', 2 after an item; a: items so far
//   String node (-1: free); stage 1: an extra key of the parent object; a: code points (only
//          when a length is bounded); b: escape (1 after '\', 2..5 \u digits); c: UTF-8 bytes
//          still due | lo << 8 | hi << 16; d: regex state
//   Number stage 0 start, 1 '-', 2 '0', 3 integer digits, 4 '.', 5 fraction, 6 'e', 7 exponent
//          sign, 8 exponent digits; a, b, c: digit counts; d: negative; v: integer part, w: fraction digits
//   Literal a: trie node
#include "grammar/json_matcher.h"

#include <algorithm>
#include <cmath>

namespace mx::grammar {
namespace {

// Whitespace between tokens: spaces and newlines only (JSON also allows tabs and CR; models
// need neither, and each is one more way to wander).
bool is_ws(uint8_t c) { return c == ' ' || c == '\n'; }
bool is_digit(uint8_t c) { return c >= '0' && c <= '9'; }
}  // namespace

JsonMatcher::JsonMatcher(std::shared_ptr<const Schema> schema) : schema_(std::move(schema)) {
  free_literals_.insert("true", 0);
  free_literals_.insert("false", 1);
  free_literals_.insert("null", 2);
  for (size_t i = 0; i < schema_->nodes.size(); ++i) min_bytes_.push_back(min_bytes(int32_t(i)));
}

// The bytes a wrap-up of a value of the node may take: the shortest content it requires, the
// longest of a literal set (recursion through $ref is cut at depth 8).
int JsonMatcher::min_bytes(int32_t idx, int depth) const {
  if (depth > 8) return 64;
  const SchemaNode& n = node(idx);
  auto digits = [](double v) { return v < 10 ? 1 : int(std::floor(std::log10(v))) + 1; };
  switch (n.kind) {
    case NodeKind::Any: return 5;  // "false"
    case NodeKind::String: {
      const Regex* re = n.regex >= 0 ? &schema_->regexes[size_t(n.regex)] : nullptr;
      return 2 + std::max(4 * n.min_length, re ? re->distance(re->start()) : 0);
    }
    case NodeKind::Number:
    case NodeKind::Integer:
      if (n.has_min && n.minimum > 0) return digits(std::ceil(n.minimum)) + 1;
      if (n.has_max && n.maximum < 0) return digits(std::ceil(-n.maximum)) + 2;
      return 2;
    case NodeKind::Literals: {  // the longest: a wrap-up does not choose among them
      const ByteTrie& t = schema_->tries[size_t(n.literals)];
      int longest = 0;
      std::vector<std::pair<int32_t, int>> todo = {{0, 0}};
      while (!todo.empty()) {
        auto [at, len] = todo.back();
        todo.pop_back();
        if (t.nodes[size_t(at)].value >= 0) longest = std::max(longest, len);
        for (const auto& e : t.nodes[size_t(at)].next) todo.emplace_back(e.second, len + 1);
      }
      return longest;
    }
    case NodeKind::AnyOf: {  // a wrap-up may take any of them
      int most = 0;
      for (int32_t a : n.alternatives) most = std::max(most, min_bytes(a, depth + 1));
      return most;
    }
    case NodeKind::Array: return 2 + n.min_items * (min_bytes(n.items, depth + 1) + 1);
    case NodeKind::Object: {
      int bytes = 2;
      for (const Property& p : n.props)
        if (p.required) bytes += int(p.name.size()) + 4 + min_bytes(p.node, depth + 1);
      return bytes;
    }
  }
  return 1;
}

MatchState JsonMatcher::start(Arena& arena) const {
  MatchState s;
  const Stack* doc = arena.make(Frame{.type = FrameType::Doc}, nullptr);
  // No whitespace before the document (the gap counter starts full).
  s.s[0] = arena.make(Frame{.type = FrameType::Value, .ws = uint8_t(kMaxWhitespace), .node = schema_->root}, doc);
  s.n = 1;
  return s;
}

bool JsonMatcher::advance(const MatchState& in, uint8_t byte, MatchState& out, Arena& arena) const {
  out.n = 0;
  out.closing = in.closing;
  Out o{out, arena, in.closing};
  for (int i = 0; i < in.n; ++i) step(in.s[size_t(i)], byte, o);
  return out.n > 0 && !o.full;
}

bool JsonMatcher::advance(const MatchState& in, std::string_view bytes, MatchState& out, Arena& arena) const {
  MatchState cur = in;
  for (unsigned char c : bytes) {
    MatchState next;
    if (!advance(cur, c, next, arena)) return false;
    cur = next;
  }
  out = cur;
  return true;
}

bool JsonMatcher::can_end(const MatchState& s) const {
  for (int i = 0; i < s.n; ++i) {
    const Stack* t = s.s[size_t(i)];
    if (t->f.type == FrameType::Doc) return true;
    const bool at_doc = t->parent && t->parent->f.type == FrameType::Doc;
    if (at_doc && t->f.type == FrameType::Number && number_complete(t->f)) return true;
    if (at_doc && t->f.type == FrameType::Literal && literal_complete(t->f)) return true;
  }
  return false;
}

MatchState JsonMatcher::copy(const MatchState& s, Arena& arena) const {
  MatchState out;
  for (int i = 0; i < s.n; ++i) {
    std::vector<const Stack*> chain;
    for (const Stack* t = s.s[size_t(i)]; t; t = t->parent) chain.push_back(t);
    const Stack* parent = nullptr;
    for (auto it = chain.rbegin(); it != chain.rend(); ++it) parent = arena.make((*it)->f, parent);
    if (parent) out.s[out.n++] = parent;
  }
  return out;
}

std::string JsonMatcher::key(const MatchState& s) const {
  std::string k;
  auto put = [&](const auto& v) { k.append(reinterpret_cast<const char*>(&v), sizeof(v)); };
  for (int i = 0; i < s.n; ++i) {
    for (const Stack* t = s.s[size_t(i)]; t; t = t->parent) {
      const Frame& f = t->f;
      put(uint32_t(uint32_t(f.type) | uint32_t(f.stage) << 8 | uint32_t(f.ws) << 16 | uint32_t(f.depth) << 24));
      put(f.node), put(f.a), put(f.b), put(f.c), put(f.d), put(f.v), put(f.w);
    }
    k.push_back('|');
  }
  k.push_back(s.closing ? 'c' : 'o');
  return k;
}

int JsonMatcher::frame_closing_bytes(const Frame& f) const {
  const SchemaNode* n = f.node >= 0 ? &node(f.node) : nullptr;
  auto required_after = [&](int32_t from) {
    int bytes = 0;
    for (size_t p = size_t(std::max(0, from)); p < n->props.size(); ++p)
      if (n->props[p].required) bytes += int(n->props[p].name.size()) + 4 + min_bytes_[size_t(n->props[p].node)];
    return bytes;
  };
  switch (f.type) {
    case FrameType::Doc: return 0;
    case FrameType::Value: return min_bytes_[size_t(f.node)];
    case FrameType::Key: {  // the rest of the longest candidate key, ':' and its value
      int bytes = 0;
      for (int32_t p = f.a; p <= f.b && p < int32_t(n->props.size()); ++p)
        bytes = std::max(bytes, int(n->props[size_t(p)].name.size()) + 3 + min_bytes_[size_t(n->props[size_t(p)].node)]);
      return bytes;
    }
    case FrameType::String: {  // the rest of a character (4), what the length or the pattern needs, '"'
      const Regex* re = n && n->regex >= 0 ? &schema_->regexes[size_t(n->regex)] : nullptr;
      return 1 + 4 + std::max(n && n->kind == NodeKind::String ? 4 * std::max(0, n->min_length - f.a) : 0,
                              re ? re->distance(f.d) : 0);
    }
    case FrameType::Number: return 2;
    case FrameType::Literal: return 8;
    case FrameType::Array:
      return 1 + (n->kind == NodeKind::Array ? std::max(0, n->min_items - f.a) * (min_bytes_[size_t(n->items)] + 1) : 0);
    case FrameType::Object: {  // '}', after a key ':' and its value, the required properties left
      int bytes = 1 + (f.stage == 1 ? 1 + min_bytes_[size_t(f.b)] : 0);
      const bool declared = n->kind == NodeKind::Object;
      const int required = declared ? required_after(f.a) : 0;
      if (f.stage == 3 && required == 0) {  // after ',' a key must come: the last candidate, or an extra one
        const bool last = declared && f.a < int32_t(n->props.size());
        const int32_t value = last ? n->props.back().node : declared ? n->additional : f.node;
        bytes += (last ? int(n->props.back().name.size()) : 0) + 4 + (value >= 0 ? min_bytes_[size_t(value)] : 5);
      }
      return bytes + required;
    }
  }
  return 0;
}

int JsonMatcher::closing_bytes(const MatchState& s) const {
  int most = 0;  // a wrap-up may follow any of the stacks
  for (int i = 0; i < s.n; ++i) {
    int bytes = 0;
    for (const Stack* t = s.s[size_t(i)]; t; t = t->parent) {
      bytes += frame_closing_bytes(t->f);
      if (t->f.type == FrameType::String && t->f.stage == 1) {  // an extra key: ':' and its value follow
        const SchemaNode& obj = node(t->parent->f.node);
        bytes += 1 + min_bytes_[size_t(obj.kind == NodeKind::Any ? t->parent->f.node : obj.additional)];
      }
    }
    most = std::max(most, bytes);
  }
  return most;
}

void JsonMatcher::step(const Stack* top, uint8_t c, Out& out) const {
  switch (top->f.type) {
    case FrameType::Doc: return;  // the document is complete: nothing may follow
    case FrameType::Value:
      if (!whitespace(top, c, out)) start_value(top->f.node, top->parent, top->f.depth, c, out);
      return;
    case FrameType::Object: return step_object(top, c, out);
    case FrameType::Key: return step_key(top, c, out);
    case FrameType::Array: return step_array(top, c, out);
    case FrameType::String: return step_string(top, c, out);
    case FrameType::Number: return step_number(top, c, out);
    case FrameType::Literal: return step_literal(top, c, out);
  }
}

// Whitespace in a gap between tokens: at most kMaxWhitespace bytes, none while wrapping up.
bool JsonMatcher::whitespace(const Stack* top, uint8_t c, Out& out) const {
  if (!is_ws(c)) return false;
  if (top->f.ws < kMaxWhitespace && !out.closing) {
    Frame g = top->f;
    g.ws++;
    out.replace(top, g);
  }
  return true;
}

void JsonMatcher::start_value(int32_t idx, const Stack* parent, uint8_t depth, uint8_t c, Out& out) const {
  const SchemaNode& n = node(idx);
  const bool any = n.kind == NodeKind::Any;
  const uint8_t inner = uint8_t(depth + 1);
  const bool room = depth < (any ? kMaxAnyDepth : kMaxNesting);
  if (n.kind == NodeKind::AnyOf) {
    for (int32_t alt : n.alternatives) start_value(alt, parent, depth, c, out);
    return;
  }
  if (c == '{' && room && (any || n.kind == NodeKind::Object)) {
    out.add(out.make(Frame{.type = FrameType::Object, .depth = inner, .node = idx}, parent));
  } else if (c == '[' && room && (any || n.kind == NodeKind::Array)) {
    out.add(out.make(Frame{.type = FrameType::Array, .depth = inner, .node = idx}, parent));
  } else if (c == '"' && (any || n.kind == NodeKind::String)) {
    const int32_t re = any ? -1 : n.regex;
    out.add(out.make(Frame{.type = FrameType::String, .depth = depth, .node = any ? -1 : idx,
                           .d = re >= 0 ? schema_->regexes[size_t(re)].start() : 0}, parent));
  } else if ((c == '-' || is_digit(c)) && (any || n.kind == NodeKind::Number || n.kind == NodeKind::Integer)) {
    if (const Stack* s = out.make(Frame{.type = FrameType::Number, .depth = depth, .node = idx}, parent)) step_number(s, c, out);
  } else if (n.kind == NodeKind::Literals || (any && (c == 't' || c == 'f' || c == 'n'))) {
    if (const Stack* s = out.make(Frame{.type = FrameType::Literal, .depth = depth, .node = idx}, parent)) step_literal(s, c, out);
  }
}

// ---- objects ----------------------------------------------------------------------------------

namespace {
struct ObjectView {
  const std::vector<Property>* props;
  int32_t additional;
  bool required_from(int32_t from) const {
    for (size_t i = size_t(from); i < props->size(); ++i)
      if ((*props)[i].required) return true;
    return false;
  }
  int32_t last_candidate(int32_t from) const {  // up to the first required property
    for (size_t i = size_t(from); i < props->size(); ++i)
      if ((*props)[i].required) return int32_t(i);
    return int32_t(props->size()) - 1;
  }
};
const std::vector<Property> kNoProps;
}  // namespace

#define MX_OBJECT_VIEW(f)                                                                   \
  const SchemaNode& n_ = node((f).node);                                                    \
  const bool free_ = n_.kind == NodeKind::Any;                                              \
  const ObjectView view{free_ ? &kNoProps : &n_.props, free_ ? (f).node : n_.additional}

void JsonMatcher::step_object(const Stack* top, uint8_t c, Out& out) const {
  const Frame& f = top->f;
  MX_OBJECT_VIEW(f);
  if (whitespace(top, c, out)) return;
  Frame g = f;
  g.ws = 0;
  if (f.stage == 0 || f.stage == 3) {
    if (c == '"' && (!out.closing || f.stage == 3 || view.required_from(f.a))) return start_key(top, out);
    if (c == '}' && f.stage == 0 && !view.required_from(0)) out.add(top->parent);
  } else if (f.stage == 1) {
    if (c != ':') return;
    g.stage = 2;
    const Stack* obj = out.make(g, top->parent);
    if (obj) out.add(out.make(Frame{.type = FrameType::Value, .depth = f.depth, .node = f.b}, obj));
  } else if (f.stage == 2) {
    const bool more = out.closing ? view.required_from(f.a) : f.a < int32_t(view.props->size()) || view.additional >= 0;
    if (c == ',' && more) {
      g.stage = 3;
      out.replace(top, g);
    } else if (c == '}' && !view.required_from(f.a)) {
      out.add(top->parent);
    }
  }
}

void JsonMatcher::start_key(const Stack* obj, Out& out) const {
  const Frame& f = obj->f;
  MX_OBJECT_VIEW(f);
  const int32_t hi = view.last_candidate(f.a), lo = out.closing ? hi : f.a;  // wrapping up: no optional keys
  const bool declared = lo >= f.a && lo <= hi;
  if (declared) out.add(out.make(Frame{.type = FrameType::Key, .depth = f.depth, .node = f.node, .a = lo, .b = hi}, obj));
  // An extra key after the declared ones (wrapping up: only when a key must come and none is declared).
  if (view.additional >= 0 && !view.required_from(f.a) && (!out.closing || !declared))
    out.add(out.make(Frame{.type = FrameType::String, .stage = 1, .depth = f.depth, .node = -1}, obj));
}

void JsonMatcher::end_key(const Stack* key_top, int32_t prop, Out& out) const {
  const Stack* obj = key_top->parent;
  MX_OBJECT_VIEW(obj->f);
  Frame g = obj->f;
  g.stage = 1;
  g.ws = 0;
  g.a = prop >= 0 ? prop + 1 : int32_t(view.props->size());
  g.b = prop >= 0 ? (*view.props)[size_t(prop)].node : view.additional;
  out.replace(obj, g);
}

void JsonMatcher::step_key(const Stack* top, uint8_t c, Out& out) const {
  const Frame& f = top->f;
  const ByteTrie& trie = schema_->tries[size_t(node(f.node).keys)];
  const int32_t child = trie.child(f.c, c);
  if (child < 0 || !trie.has_value_in(child, f.a, f.b)) return;
  const int32_t value = trie.nodes[size_t(child)].value;
  if (c == '"' && value >= 0) return end_key(top, value, out);
  Frame g = f;
  g.c = child;
  out.replace(top, g);
}

#undef MX_OBJECT_VIEW

// ---- arrays -----------------------------------------------------------------------------------

void JsonMatcher::step_array(const Stack* top, uint8_t c, Out& out) const {
  const Frame& f = top->f;
  const SchemaNode& n = node(f.node);
  const bool free = n.kind == NodeKind::Any;
  const int32_t items = free ? f.node : n.items, min = free ? 0 : n.min_items, max = free ? -1 : n.max_items;
  if (whitespace(top, c, out)) return;
  Frame g = f;
  g.ws = 0;
  if (c == ']' && f.a >= min) return out.add(top->parent);
  if (out.closing && f.a >= min) return;  // no more items than required
  if (f.stage == 0 && max != 0) {
    g.stage = 2;
    g.a = 1;
    if (const Stack* arr = out.make(g, top->parent)) start_value(items, arr, f.depth, c, out);
  } else if (f.stage == 2 && c == ',' && (max < 0 || f.a < max)) {
    g.a++;
    const Stack* arr = out.make(g, top->parent);
    if (arr) out.add(out.make(Frame{.type = FrameType::Value, .depth = f.depth, .node = items}, arr));
  }
}

}  // namespace mx::grammar
