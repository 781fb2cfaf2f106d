#include "lily/runtime/session.h"

#include <algorithm>

#include "lily/error.h"

namespace lily {

namespace {
bool is_prefix(const std::vector<int32_t>& p, const std::vector<int32_t>& of) {
  return p.size() <= of.size() && std::equal(p.begin(), p.end(), of.begin());
}
}  // namespace

Session::Session(const Model& model, std::shared_ptr<Backend> backend)
    : model_(model), fwd_(model, std::move(backend)), state_(fwd_.new_state()) {}

void Session::reset() {
  state_.reset();
  tokens_.clear();
}

std::vector<float> Session::feed(std::span<const int32_t> toks, ForwardMode mode) {
  std::vector<float> logits = fwd_.forward(toks, state_, LogitsFor::LastPosition, mode);
  tokens_.insert(tokens_.end(), toks.begin(), toks.end());
  return logits;
}

std::span<const int32_t> Session::prepare(const std::vector<int32_t>& prompt, size_t checkpoint_at) {
  if (prompt.empty()) throw Error("the prompt is empty");
  // At least the last prompt token must be computed to have its logits.
  if (!(is_prefix(tokens_, prompt) && tokens_.size() < prompt.size())) {
    if (checkpoint_ && is_prefix(checkpoint_->tokens, prompt) && checkpoint_->tokens.size() < prompt.size()) {
      state_ = checkpoint_->state;
      tokens_ = checkpoint_->tokens;
    } else {
      reset();
    }
  }
  reused_ = tokens_.size();
  const std::span<const int32_t> all(prompt);
  if (checkpoint_at > tokens_.size() && checkpoint_at < prompt.size()) {
    feed(all.subspan(tokens_.size(), checkpoint_at - tokens_.size()), ForwardMode::Prompt);
    checkpoint_ = Checkpoint{state_, tokens_};
  }
  checkpoint_after_ = checkpoint_at == prompt.size();
  return all.subspan(tokens_.size());
}

std::vector<float> Session::prefill(const std::vector<int32_t>& prompt, size_t checkpoint_at) {
  const std::vector<float> logits = feed(prepare(prompt, checkpoint_at), ForwardMode::Prompt);
  if (checkpoint_after_) checkpoint_ = Checkpoint{state_, tokens_};
  return logits;
}

int32_t Session::prefill_pick(const std::vector<int32_t>& prompt, size_t checkpoint_at, const TokenPick& pick) {
  const int32_t token = feed_pick(prepare(prompt, checkpoint_at), ForwardMode::Prompt, pick);
  if (checkpoint_after_) checkpoint_ = Checkpoint{state_, tokens_};
  return token;
}

int32_t Session::step_pick(int32_t token, const TokenPick& pick) {
  return feed_pick(std::span<const int32_t>(&token, 1), ForwardMode::Decode, pick);
}

int32_t Session::feed_pick(std::span<const int32_t> toks, ForwardMode mode, const TokenPick& pick) {
  const int32_t next = fwd_.forward_pick(toks, state_, mode, pick);
  tokens_.insert(tokens_.end(), toks.begin(), toks.end());
  return next;
}

std::vector<float> Session::step(int32_t token) { return feed(std::span<const int32_t>(&token, 1), ForwardMode::Decode); }

void Session::set_mtp(int64_t drafts) {
  if (drafts < 0 || drafts > kMaxDrafts)
    throw Error("--mtp takes 0 to " + std::to_string(kMaxDrafts) + " drafts per step, not " + std::to_string(drafts));
  fwd_.keep_mtp(drafts > 0);
  mtp_ = drafts;
  state_ = fwd_.new_state();  // with room for the head's cache, or without
  tokens_.clear();
  checkpoint_.reset();
}

std::vector<float> Session::speculate(int32_t token, std::vector<int32_t>* drafts) {
  if (mtp_ == 0) throw Error("speculate: speculative decoding is off (set_mtp)");
  *drafts = fwd_.draft(state_, token, mtp_);
  std::vector<int32_t> rows = {token};
  rows.insert(rows.end(), drafts->begin(), drafts->end());
  std::vector<float> logits = fwd_.verify(rows, state_, undo_);
  tokens_.insert(tokens_.end(), rows.begin(), rows.end());
  return logits;
}

void Session::accept(int64_t rows) {
  fwd_.rewind(state_, undo_, rows);
  tokens_.resize(tokens_.size() - static_cast<size_t>(undo_.rows - rows));
  undo_ = {};
}

}  // namespace lily
