// Saved sequence states keyed by the tokens that produced them, so a request
// whose prompt starts with a cached prefix resumes there and prefills only
// the rest. A hybrid model's Gated DeltaNet state cannot be cut back to an
// earlier position, so reuse needs a saved copy at that exact position; the
// KV cache of the attention layers travels in the same copy.
//
// Only states made by prompt processing at multiples of the delta-rule chunk
// are stored: resuming from one is bit-exact with a fresh prefill, so a
// cached answer is the uncached answer. Bounded by bytes, least recently used
// out first.
#pragma once

#include <cstdint>
#include <list>
#include <mutex>
#include <optional>
#include <vector>

#include "lily/model/sequence_state.h"

namespace lily {

class PrefixCache {
 public:
  explicit PrefixCache(size_t capacity_bytes) : capacity_(capacity_bytes) {}

  // The longest cached prefix of `prompt` shorter than it (the last prompt
  // token must still be computed to have its logits); its state is copied into `state`.
  // Returns the prefix length, 0 when nothing matched.
  size_t restore(const std::vector<int32_t>& prompt, SequenceState& state);
  // Stores a copy of `state`, which holds exactly `tokens`. An entry larger
  // than the whole cache is not stored.
  void insert(const std::vector<int32_t>& tokens, const SequenceState& state);

  static size_t state_bytes(const SequenceState& state);

  struct Stats {
    size_t entries = 0, bytes = 0, capacity = 0;
    uint64_t hits = 0, misses = 0, reused_tokens = 0, evictions = 0;
  };
  Stats stats() const;
  void clear();

 private:
  struct Entry {
    std::vector<int32_t> tokens;
    SequenceState state;
    size_t bytes;
  };
  std::list<Entry> entries_;  // most recently used first
  size_t capacity_, bytes_ = 0;
  Stats counts_;
  mutable std::mutex mu_;
};

}  // namespace lily
