// Everything one sequence carries between forward calls: how many tokens it
// has consumed, and the state its backend keeps for it (the KV cache of the
// full-attention layers, the conv + recurrent state of the GDN layers) in
// that backend's memory. Feeding a prompt in one call, in chunks or token by
// token through the same state gives the same logits. Copying a state takes
// a snapshot in the same memory (the prefix cache's entries).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "lily/backend/backend.h"
#include "lily/model/config.h"

namespace lily {

// The state layout of a model's configuration.
StateLayout state_layout(const ModelConfig& config);

class SequenceState {
 public:
  explicit SequenceState(std::unique_ptr<StateStorage> storage) : storage_(std::move(storage)) {}
  SequenceState(const SequenceState& o)
      : position_(o.position_), storage_(o.storage_->clone()), mtp_hidden_(o.mtp_hidden_) {}
  SequenceState& operator=(const SequenceState& o) {
    if (this != &o) {
      position_ = o.position_;
      storage_ = o.storage_->clone();
      mtp_hidden_ = o.mtp_hidden_;
    }
    return *this;
  }
  SequenceState(SequenceState&&) noexcept = default;
  SequenceState& operator=(SequenceState&&) noexcept = default;

  int64_t position() const { return position_; }  // tokens consumed so far
  void advance(int64_t n) { position_ += n; }
  // Back to `position` tokens (speculative decoding takes back rejected drafts).
  void rewind_to(int64_t position) { position_ = position; }
  // Returns to the empty sequence.
  void reset() {
    position_ = 0;
    storage_->reset();
    mtp_hidden_.clear();
  }
  // Where the MTP head is kept up: the model's hidden state (after the final
  // norm) at the last position consumed, which the head reads beside the
  // token that comes next. Empty otherwise.
  std::vector<float>& mtp_hidden() { return mtp_hidden_; }
  const std::vector<float>& mtp_hidden() const { return mtp_hidden_; }
  StateStorage& storage() { return *storage_; }
  size_t bytes() const { return sizeof(*this) + storage_->bytes() + mtp_hidden_.size() * sizeof(float); }

 private:
  int64_t position_ = 0;
  std::unique_ptr<StateStorage> storage_;
  std::vector<float> mtp_hidden_;
};

}  // namespace lily
