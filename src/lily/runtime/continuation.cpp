#include "lily/runtime/continuation.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace lily {

namespace {
constexpr std::string_view kEndThink = "</think>";

TokenLogprob logprobs_of(const std::vector<float>& logits, int32_t token, int top) {
  const float mx = *std::max_element(logits.begin(), logits.end());
  double sum = 0;
  for (float l : logits) sum += std::exp(static_cast<double>(l - mx));
  const float lse = mx + static_cast<float>(std::log(sum));
  TokenLogprob r{token, logits[token] - lse, {}};
  if (top > 0) {
    std::vector<int32_t> idx(logits.size());
    std::iota(idx.begin(), idx.end(), 0);
    const size_t k = std::min(static_cast<size_t>(top), idx.size());
    std::partial_sort(idx.begin(), idx.begin() + k, idx.end(),
                      [&](int32_t a, int32_t b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); });
    for (size_t i = 0; i < k; ++i) r.top.emplace_back(idx[i], logits[idx[i]] - lse);
  }
  return r;
}
}  // namespace

Continuation::Continuation(const Engine& engine, const ContinuationParams& p, const std::vector<int32_t>& prompt)
    : engine_(engine),
      p_(p),
      sampler_(p.sampling),
      decoder_(engine.tokenizer()),
      stops_(p.stop),
      in_reasoning_(p.json_object && p.reasoning_open) {
  sampler_.set_context(prompt);
  if (p.json_object) json_.emplace();
}

bool Continuation::allowed(int32_t token) const {
  const auto& ids = engine_.stop_ids();
  const bool is_stop = std::find(ids.begin(), ids.end(), token) != ids.end();
  if (in_reasoning_) return true;
  if (json_->complete()) return is_stop;
  if (is_stop) return false;
  const std::string bytes = engine_.tokenizer().token_bytes(token);
  return !bytes.empty() && json_->accepts(bytes);
}

std::string Continuation::flush() { return stops_.push(decoder_.finish()) + stops_.finish(); }

Continuation::Step Continuation::next(std::vector<float>& logits) {
  const std::vector<float> raw = p_.top_logprobs >= 0 ? logits : std::vector<float>();
  const int32_t tok = json_ ? sampler_.sample(logits, [this](int32_t t) { return allowed(t); }) : sampler_.sample(logits);
  if (tok < 0) {  // the constraint left nothing: end rather than break it
    Step s;
    s.text = flush();
    s.finish_reason = "stop";
    return s;
  }
  Step s = accept(tok);
  if (p_.top_logprobs >= 0) s.logprob = logprobs_of(raw, tok, p_.top_logprobs);
  return s;
}

bool Continuation::picks_anywhere() const { return !json_ && p_.top_logprobs < 0; }

TokenPick Continuation::plan() { return sampler_.plan(engine_.model().config().vocab_size); }

Continuation::Step Continuation::picked(int32_t tok) {
  sampler_.record(tok);
  return accept(tok);
}

Continuation::Step Continuation::accept(int32_t tok) {
  Step s;
  ++generated_;
  tokens_.push_back(tok);
  const auto& ids = engine_.stop_ids();
  if (std::find(ids.begin(), ids.end(), tok) != ids.end()) {
    s.text = flush();
    s.finish_reason = "stop";
    return s;
  }
  if (json_) {
    const std::string bytes = engine_.tokenizer().token_bytes(tok);
    if (in_reasoning_) {
      reasoning_tail_ += bytes;
      if (reasoning_tail_.find(kEndThink) != std::string::npos) in_reasoning_ = false;
      if (reasoning_tail_.size() > kEndThink.size())
        reasoning_tail_.erase(0, reasoning_tail_.size() - kEndThink.size());
    } else {
      json_->push(bytes);
    }
  }
  s.text = stops_.push(decoder_.push(tok));
  if (stops_.stopped()) {
    s.finish_reason = "stop";
    s.stop_sequence = stops_.matched();
    return s;
  }
  if (generated_ >= p_.max_tokens) {
    s.text += flush();
    s.finish_reason = "length";
    return s;
  }
  s.feed = tok;
  return s;
}

}  // namespace lily
