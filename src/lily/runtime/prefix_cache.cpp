#include "lily/runtime/prefix_cache.h"

#include <algorithm>

namespace lily {

size_t PrefixCache::state_bytes(const SequenceState& state) { return state.bytes(); }

size_t PrefixCache::restore(const std::vector<int32_t>& prompt, SequenceState& state) {
  std::lock_guard<std::mutex> lock(mu_);
  auto best = entries_.end();
  for (auto it = entries_.begin(); it != entries_.end(); ++it) {
    const auto& t = it->tokens;
    if (t.size() >= prompt.size() || (best != entries_.end() && t.size() <= best->tokens.size())) continue;
    if (std::equal(t.begin(), t.end(), prompt.begin())) best = it;
  }
  if (best == entries_.end()) {
    ++counts_.misses;
    return 0;
  }
  entries_.splice(entries_.begin(), entries_, best);
  state = best->state;
  ++counts_.hits;
  counts_.reused_tokens += best->tokens.size();
  return best->tokens.size();
}

void PrefixCache::insert(const std::vector<int32_t>& tokens, const SequenceState& state) {
  const size_t bytes = state_bytes(state) + tokens.size() * sizeof(int32_t);
  std::lock_guard<std::mutex> lock(mu_);
  if (bytes > capacity_ || tokens.empty()) return;
  for (auto it = entries_.begin(); it != entries_.end(); ++it)
    if (it->tokens == tokens) {  // already there: just fresher
      entries_.splice(entries_.begin(), entries_, it);
      return;
    }
  while (bytes_ + bytes > capacity_ && !entries_.empty()) {
    bytes_ -= entries_.back().bytes;
    entries_.pop_back();
    ++counts_.evictions;
  }
  entries_.push_front(Entry{tokens, state, bytes});
  bytes_ += bytes;
}

PrefixCache::Stats PrefixCache::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  Stats s = counts_;
  s.entries = entries_.size();
  s.bytes = bytes_;
  s.capacity = capacity_;
  return s;
}

void PrefixCache::clear() {
  std::lock_guard<std::mutex> lock(mu_);
  entries_.clear();
  bytes_ = 0;
}

}  // namespace lily
