// JsonMatcher: a byte-level pushdown automaton for one compiled Schema. A state is a small set of
// stacks (anyOf and optional keys may keep several alive); stacks are persistent linked frames in
// an arena, so advancing by a byte allocates O(1) frames and never copies a stack. Every byte it
// accepts keeps a way to finish the document (numbers and literals check that ahead), so a mask
// built from it never leads the model into a dead end.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "grammar/json_schema.h"

namespace mx::grammar {

enum class FrameType : uint8_t { Doc, Value, Object, Key, Array, String, Number, Literal };

struct Frame {
  FrameType type = FrameType::Doc;
  uint8_t stage = 0;
  uint8_t ws = 0;     // whitespace bytes in the current gap
  uint8_t depth = 0;  // containers around it
  int32_t node = -1;  // schema node
  int32_t a = 0, b = 0, c = 0, d = 0;  // per type (json_matcher.cpp)
  double v = 0, w = 0;                 // numbers: integer part and fraction so far
};

struct Stack {
  Frame f;
  const Stack* parent = nullptr;
};

// Bump allocation of stack frames with rewind (a scratch arena of fixed capacity, or a growing one).
class Arena {
 public:
  explicit Arena(size_t capacity) : nodes_(capacity) {}
  Stack* make(const Frame& f, const Stack* parent) {
    if (used_ == nodes_.size()) return nullptr;
    nodes_[used_] = {f, parent};
    return &nodes_[used_++];
  }
  size_t mark() const { return used_; }
  void rewind(size_t mark) { used_ = mark; }

 private:
  std::vector<Stack> nodes_;
  size_t used_ = 0;
};

inline constexpr int kMaxStacks = 8;
inline constexpr int kMaxNesting = 32;  // containers inside containers, schema or free

struct MatchState {
  uint8_t n = 0;
  // Wrapping up (few tokens left): only bytes that finish the document the shortest way are
  // accepted (no whitespace, no optional content, no further items or properties than required).
  bool closing = false;
  std::array<const Stack*, kMaxStacks> s{};
};

class JsonMatcher {
 public:
  explicit JsonMatcher(std::shared_ptr<const Schema> schema);
  const Schema& schema() const { return *schema_; }

  MatchState start(Arena& arena) const;
  // out = in advanced by one byte; false when no stack accepts it (or the arena is full).
  bool advance(const MatchState& in, uint8_t byte, MatchState& out, Arena& arena) const;
  bool advance(const MatchState& in, std::string_view bytes, MatchState& out, Arena& arena) const;
  bool can_end(const MatchState& s) const;  // the bytes so far are one complete document
  // A copy whose frames live in `arena` (compaction between tokens).
  MatchState copy(const MatchState& s, Arena& arena) const;
  // The state's frames as bytes (a cache key: equal keys accept the same continuations).
  std::string key(const MatchState& s) const;
  // At most how many bytes a wrap-up (closing mode) from s takes to end the document.
  int closing_bytes(const MatchState& s) const;
  // One stack, inside a string's content with no pattern, no escape and no character begun: every
  // content character is then judged alike (by the count of code points so far).
  bool in_plain_string(const MatchState& s) const;

 private:
  struct Out {  // the stacks one step produces
    MatchState& state;
    Arena& arena;
    bool closing = false;
    bool full = false;
    const Stack* make(const Frame& f, const Stack* parent) {
      const Stack* s = arena.make(f, parent);
      full |= s == nullptr;
      return s;
    }
    void add(const Stack* s) {
      if (s == nullptr || state.n == kMaxStacks) return;
      for (int i = 0; i < state.n; ++i)
        if (state.s[size_t(i)] == s) return;
      state.s[state.n++] = s;
    }
    void replace(const Stack* top, const Frame& f) { add(make(f, top->parent)); }
  };
  void step(const Stack* top, uint8_t c, Out& out) const;
  bool whitespace(const Stack* top, uint8_t c, Out& out) const;  // true: c was whitespace (taken or refused)
  void start_value(int32_t node, const Stack* parent, uint8_t depth, uint8_t c, Out& out) const;
  void step_object(const Stack* top, uint8_t c, Out& out) const;
  void step_key(const Stack* top, uint8_t c, Out& out) const;
  void step_array(const Stack* top, uint8_t c, Out& out) const;
  void step_string(const Stack* top, uint8_t c, Out& out) const;
  void step_number(const Stack* top, uint8_t c, Out& out) const;
  void step_literal(const Stack* top, uint8_t c, Out& out) const;
  void start_key(const Stack* obj, Out& out) const;  // after the opening quote of a key
  void end_key(const Stack* key_top, int32_t prop, Out& out) const;
  bool number_feasible(const Frame& f) const;
  bool number_complete(const Frame& f) const;
  bool literal_complete(const Frame& f) const;
  const ByteTrie& literal_trie(const Frame& f) const;
  const SchemaNode& node(int32_t i) const { return schema_->nodes[size_t(i)]; }

  int min_bytes(int32_t node, int depth = 0) const;  // a wrap-up's bytes for a value of the node
  int frame_closing_bytes(const Frame& f) const;

  std::shared_ptr<const Schema> schema_;
  ByteTrie free_literals_;  // true, false, null (free JSON)
  std::vector<int> min_bytes_;  // per node
};

}  // namespace mx::grammar
