#include "lily/model/qwen35moe.h"

#include <algorithm>
#include <map>
#include <string>

#include "lily/backend/backend_factory.h"
#include "lily/error.h"

namespace lily {

namespace {

RowKind kind_of(ForwardMode mode) { return mode == ForwardMode::Prompt ? RowKind::Prompt : RowKind::Tokens; }

// The weight set with every matrix and vector in the backend's memory; a
// matrix seen twice (the head tied to the embedding) is bound once.
ModelWeights bound_to(Backend& backend, const ModelWeights& w, size_t bytes) {
  if (const size_t free = backend.memory_free(); free > 0 && bytes > free)
    throw Error("the weights need " + std::to_string(bytes >> 20) + " MiB but " + backend.describe() + " has " +
                std::to_string(free >> 20) + " MiB free: use a more quantized checkpoint or another device");
  struct Binder {
    Backend& backend;
    std::map<const void*, Matrix> seen;
    Matrix bind(const Matrix& m) {
      auto it = seen.find(m.data);
      if (it == seen.end()) it = seen.emplace(m.data, backend.bind(m)).first;
      return it->second;
    }
    Vector bind(const Vector& v) { return backend.bind(v); }
  } b{backend, {}};
  auto bind_layer = [&b](const LayerWeights& L) {
    LayerWeights o;
    o.kind = L.kind;
    o.input_norm = b.bind(L.input_norm);
    o.post_attention_norm = b.bind(L.post_attention_norm);
    if (L.kind == LayerKind::LinearAttention) {
      const GatedDeltaNetWeights& g = L.gdn;
      o.gdn = {b.bind(g.in_qkv), b.bind(g.in_z),      b.bind(g.in_b),    b.bind(g.in_a), b.bind(g.out),
               b.bind(g.conv),   b.bind(g.neg_exp_a), b.bind(g.dt_bias), b.bind(g.norm)};
    } else {
      const AttentionWeights& a = L.attn;
      o.attn = {b.bind(a.q), b.bind(a.k), b.bind(a.v), b.bind(a.o), b.bind(a.q_norm), b.bind(a.k_norm)};
    }
    const MoeWeights& m = L.moe;
    o.moe.router = b.bind(m.router);
    for (const Matrix& x : m.gate) o.moe.gate.push_back(b.bind(x));
    for (const Matrix& x : m.up) o.moe.up.push_back(b.bind(x));
    for (const Matrix& x : m.down) o.moe.down.push_back(b.bind(x));
    o.moe.shared_gate = b.bind(m.shared_gate);
    o.moe.shared_up = b.bind(m.shared_up);
    o.moe.shared_down = b.bind(m.shared_down);
    o.moe.shared_expert_gate = b.bind(m.shared_expert_gate);
    return o;
  };
  ModelWeights out;
  out.embed = b.bind(w.embed);
  out.lm_head = b.bind(w.lm_head);
  out.final_norm = b.bind(w.final_norm);
  for (const LayerWeights& L : w.layers) out.layers.push_back(bind_layer(L));
  if (w.mtp) {
    const MtpWeights& m = *w.mtp;
    out.mtp = MtpWeights{b.bind(m.fc), b.bind(m.embed_norm), b.bind(m.hidden_norm), b.bind(m.final_norm),
                         bind_layer(m.layer)};
  }
  return out;
}

}  // namespace

Qwen35MoeForward::Qwen35MoeForward(const Model& model, std::shared_ptr<Backend> backend)
    : model_(model),
      cfg_(model.config()),
      backend_(backend ? std::move(backend) : make_backend(Device::Cpu)),
      weights_(bound_to(*backend_, model.weights(), model.report().weight_bytes)),
      layout_(state_layout(cfg_)),
      delta_{cfg_.linear_num_key_heads, cfg_.linear_num_value_heads, cfg_.linear_key_head_dim,
             cfg_.linear_value_head_dim, cfg_.linear_conv_kernel, kDeltaChunk, cfg_.gdn_tiled_value_heads},
      attention_{cfg_.num_heads, cfg_.num_kv_heads, cfg_.head_dim, cfg_.rotary_dim, cfg_.rope_theta} {
  for (int64_t i = 0; i < cfg_.num_layers + (weights_.mtp ? 1 : 0); ++i) {
    const MoeWeights& m = layer_weights(i).moe;
    experts_.push_back({&m.router, m.gate, m.up, m.down, &m.shared_gate, &m.shared_up, &m.shared_down,
                        &m.shared_expert_gate});
  }
}

SequenceState Qwen35MoeForward::new_state() const {
  if (!keep_mtp_) return SequenceState(backend_->new_state(layout_));
  StateLayout with_head = layout_;
  with_head.delta_layer.push_back(false);  // the MTP head's attention cache, as layer num_layers
  return SequenceState(backend_->new_state(with_head));
}

void Qwen35MoeForward::check_tokens(std::span<const int32_t> tokens) const {
  const int64_t V = cfg_.vocab_size;
  if (tokens.empty()) throw Error("no tokens to process");
  for (size_t t = 0; t < tokens.size(); ++t)
    if (tokens[t] < 0 || tokens[t] >= V)
      throw Error("token id " + std::to_string(tokens[t]) + " at position " + std::to_string(t) +
                  " is outside the vocabulary (0.." + std::to_string(V - 1) + ")");
}

std::vector<float> Qwen35MoeForward::forward(std::span<const int32_t> tokens, SequenceState& state, LogitsFor which) {
  return forward(tokens, state, which, tokens.size() == 1 ? ForwardMode::Decode : ForwardMode::Prompt);
}

std::vector<float> Qwen35MoeForward::forward(std::span<const int32_t> tokens, SequenceState& state, LogitsFor which,
                                             ForwardMode mode) {
  check_tokens(tokens);
  if (mode == ForwardMode::Decode && tokens.size() != 1)
    throw Error("a decode step takes one token per sequence, not " + std::to_string(tokens.size()));
  const Segment seg{&state, 0, static_cast<int64_t>(tokens.size())};
  return run(tokens, std::span<const Segment>(&seg, 1), mode, which);
}

std::vector<float> Qwen35MoeForward::decode_batch(std::span<const int32_t> tokens,
                                                  std::span<SequenceState* const> states) {
  check_tokens(tokens);
  if (states.size() != tokens.size())
    throw Error("decode_batch: " + std::to_string(tokens.size()) + " tokens for " + std::to_string(states.size()) +
                " sequences");
  std::vector<Segment> segs;
  for (size_t i = 0; i < states.size(); ++i) segs.push_back({states[i], static_cast<int64_t>(i), 1});
  return run(tokens, segs, ForwardMode::Decode, LogitsFor::AllPositions);
}

std::vector<float> Qwen35MoeForward::prefill_batch(std::span<const std::vector<int32_t>> pieces,
                                                   std::span<SequenceState* const> states) {
  if (states.size() != pieces.size())
    throw Error("prefill_batch: " + std::to_string(pieces.size()) + " pieces for " + std::to_string(states.size()) +
                " sequences");
  std::vector<int32_t> tokens;
  std::vector<Segment> segs;
  for (size_t i = 0; i < pieces.size(); ++i) {
    check_tokens(pieces[i]);
    segs.push_back({states[i], static_cast<int64_t>(tokens.size()), static_cast<int64_t>(pieces[i].size())});
    tokens.insert(tokens.end(), pieces[i].begin(), pieces[i].end());
  }
  return run(tokens, segs, ForwardMode::Prompt, LogitsFor::LastOfEachSequence);
}

int32_t Qwen35MoeForward::forward_pick(std::span<const int32_t> tokens, SequenceState& state, ForwardMode mode,
                                       const TokenPick& pick) {
  check_tokens(tokens);
  if (mode == ForwardMode::Decode && tokens.size() != 1)
    throw Error("a decode step takes one token per sequence, not " + std::to_string(tokens.size()));
  const Segment seg{&state, 0, static_cast<int64_t>(tokens.size())};
  const Tensor logits = run_logits(tokens, std::span<const Segment>(&seg, 1), mode, LogitsFor::LastPosition);
  return backend_->pick_tokens(logits, std::span<const TokenPick>(&pick, 1))[0];
}

std::vector<float> Qwen35MoeForward::run(std::span<const int32_t> tokens, std::span<const Segment> segs,
                                         ForwardMode mode, LogitsFor which) {
  return backend_->to_host(run_logits(tokens, segs, mode, which));
}

Tensor Qwen35MoeForward::run_logits(std::span<const int32_t> tokens, std::span<const Segment> segs, ForwardMode mode,
                                    LogitsFor which, std::vector<float>* hidden) {
  std::vector<SeqSlice> seqs;
  for (const Segment& s : segs) seqs.push_back({&s.state->storage(), s.row, s.rows, s.state->position()});
  if (keep_mtp_) {  // checked before anything moves
    for (const Segment& s : segs) {
      if (s.state->storage().layer_count() <= cfg_.num_layers)
        throw Error("this sequence state was made before the MTP head was kept up: it has no room for the head's cache");
      if (s.state->position() > 0 && s.state->mtp_hidden().size() != static_cast<size_t>(cfg_.hidden_size))
        throw Error("the MTP head was not kept up over this sequence's first " + std::to_string(s.state->position()) +
                    " tokens (they were consumed with speculative decoding off)");
    }
  }
  const bool want_hidden = keep_mtp_ || hidden != nullptr;
  Tensor residual;
  auto queue = [&] { return queue_logits(tokens, seqs, mode, which, want_hidden ? &residual : nullptr); };
  // a decode step may be replayed from a recording (Backend::decode_step);
  // one that hands out its residual is always queued
  Tensor logits = mode == ForwardMode::Decode && !want_hidden ? backend_->decode_step(tokens, seqs, this, queue) : queue();
  if (want_hidden) {
    Backend& B = *backend_;
    Tensor normed = B.tensor(residual.rows, residual.cols);
    B.rmsnorm(residual, weights_.final_norm, static_cast<float>(cfg_.rms_norm_eps), normed);
    std::vector<float> rows = B.to_host(normed);
    if (keep_mtp_) keep_mtp_up(tokens, segs, rows, kind_of(mode));
    if (hidden) *hidden = std::move(rows);
  }
  for (const Segment& s : segs) s.state->advance(s.rows);
  return logits;
}

Tensor Qwen35MoeForward::queue_residual(std::span<const int32_t> tokens, std::span<const SeqSlice> seqs, RowKind kind) {
  Backend& B = *backend_;
  const ModelWeights& w = weights_;
  const int64_t T = static_cast<int64_t>(tokens.size()), H = cfg_.hidden_size;
  const float eps = static_cast<float>(cfg_.rms_norm_eps);

  Tensor x = B.embed(w.embed, tokens), h = B.tensor(T, H), out = B.tensor(T, H);
  // each residual add is fused with the norm that reads its sum
  B.rmsnorm(x, w.layers[0].input_norm, eps, h);
  for (int64_t i = 0; i < cfg_.num_layers; ++i) {
    const LayerWeights& L = w.layers[i];
    if (L.kind == LayerKind::LinearAttention)
      gated_delta_net(i, seqs, kind, h, out);
    else
      attention(i, seqs, kind, h, out);
    B.add_rmsnorm(x, out, L.post_attention_norm, eps, h);
    B.moe(h, experts_[i], cfg_.experts_per_token, out, kind);
    if (i + 1 < cfg_.num_layers)
      B.add_rmsnorm(x, out, w.layers[i + 1].input_norm, eps, h);
    else
      B.add(x, out);
  }
  return x;
}

Tensor Qwen35MoeForward::queue_logits(std::span<const int32_t> tokens, std::span<const SeqSlice> seqs, ForwardMode mode,
                                      LogitsFor which, Tensor* residual) {
  Backend& B = *backend_;
  const ModelWeights& w = weights_;
  const int64_t T = static_cast<int64_t>(tokens.size()), H = cfg_.hidden_size;
  const float eps = static_cast<float>(cfg_.rms_norm_eps);
  const RowKind kind = kind_of(mode);
  Tensor x = queue_residual(tokens, seqs, kind);
  if (residual) *residual = x;

  // The rows that get logits. Single rows go through the head as decode
  // tokens do, so a prompt's last logits do not depend on the call's shape.
  std::vector<int64_t> picked;
  if (which == LogitsFor::AllPositions)
    for (int64_t t = 0; t < T; ++t) picked.push_back(t);
  else if (which == LogitsFor::LastPosition)
    picked.push_back(T - 1);
  else
    for (const SeqSlice& s : seqs) picked.push_back(s.row + s.rows - 1);
  const int64_t rows = static_cast<int64_t>(picked.size());
  Tensor last = B.gather(x, picked), normed = B.tensor(rows, H), logits = B.tensor(rows, cfg_.vocab_size);
  B.rmsnorm(last, w.final_norm, eps, normed);
  const bool whole_prompt = which == LogitsFor::AllPositions && rows > 1;
  B.matmul(normed, w.lm_head, logits, whole_prompt ? kind : RowKind::Tokens);
  return logits;
}

void Qwen35MoeForward::gated_delta_net(int64_t layer, std::span<const SeqSlice> seqs, RowKind kind, const Tensor& x,
                                       Tensor& out) {
  Backend& B = *backend_;
  const GatedDeltaNetWeights& g = weights_.layers[layer].gdn;
  const int64_t T = x.rows, C = cfg_.gdn_conv_dim(), VD = cfg_.gdn_value_dim(), Hv = cfg_.linear_num_value_heads;

  Tensor qkv = B.tensor(T, C), z = B.tensor(T, VD), beta = B.wide_tensor(T, Hv), decay = B.wide_tensor(T, Hv);
  const MatmulJob in_proj[] = {{&x, &g.in_qkv, &qkv}, {&x, &g.in_z, &z}, {&x, &g.in_b, &beta}, {&x, &g.in_a, &decay}};
  B.matmul_batch(in_proj, kind);
  if (recording_) {
    recording_->qkv[static_cast<size_t>(layer)] = B.to_host(qkv);
    recording_->beta[static_cast<size_t>(layer)] = B.to_host(beta);
    recording_->decay[static_cast<size_t>(layer)] = B.to_host(decay);
  }
  Tensor mixed = B.tensor(T, C);
  B.delta_inputs(layer, seqs, qkv, g.conv, g.neg_exp_a, g.dt_bias, delta_, mixed, beta, decay);
  Tensor o = B.tensor(T, VD);
  B.delta_rule(layer, seqs, mixed, decay, beta, delta_, kind, o);
  B.gated_rmsnorm(o, z, g.norm, static_cast<float>(cfg_.rms_norm_eps), o);
  B.matmul(o, g.out, out, kind);
}

void Qwen35MoeForward::attention(int64_t layer, std::span<const SeqSlice> seqs, RowKind kind, const Tensor& x,
                                 Tensor& out) {
  Backend& B = *backend_;
  const AttentionWeights& w = layer_weights(layer).attn;
  const int64_t T = x.rows, nh = cfg_.num_heads, nkv = cfg_.num_kv_heads, hd = cfg_.head_dim;
  const float eps = static_cast<float>(cfg_.rms_norm_eps);

  Tensor qg = B.tensor(T, nh * 2 * hd), k = B.tensor(T, nkv * hd), v = B.tensor(T, nkv * hd);
  const MatmulJob in_proj[] = {{&x, &w.q, &qg}, {&x, &w.k, &k}, {&x, &w.v, &v}};
  B.matmul_batch(in_proj, kind);
  Tensor q = B.tensor(T, nh * hd), gate = B.tensor(T, nh * hd);
  B.attention_inputs(qg, k, w.q_norm, w.k_norm, eps, seqs, attention_, q, gate);
  Tensor attn = B.tensor(T, nh * hd);
  B.attention(layer, seqs, q, k, v, attention_, attn);
  B.sigmoid_mul(attn, gate);
  B.matmul(attn, w.o, out, kind);
}

void Qwen35MoeForward::keep_mtp(bool on) {
  if (on && !weights_.mtp)
    throw Error(model_.report().mtp_note.empty()
                    ? "this checkpoint has no MTP head (mtp.* tensors): speculative decoding needs the official "
                      "release layout or an MTP GGUF; MLX conversions drop the head"
                    : "this checkpoint's MTP head cannot be used (" + model_.report().mtp_note + "): no speculative decoding");
  keep_mtp_ = on;
}

void Qwen35MoeForward::keep_mtp_up(std::span<const int32_t> tokens, std::span<const Segment> segs,
                                   std::span<const float> hidden, RowKind kind) {
  const size_t H = static_cast<size_t>(cfg_.hidden_size);
  for (const Segment& s : segs) {
    SequenceState& st = *s.state;
    const int64_t p = st.position();
    const float* h = hidden.data() + static_cast<size_t>(s.row) * H;
    // the head at position q reads the token at q + 1 and the hidden state at q
    std::vector<int32_t> next;
    std::vector<float> in;
    int64_t first = p - 1;
    if (p == 0) {
      first = 0;
      next.assign(tokens.begin() + s.row + 1, tokens.begin() + s.row + s.rows);
      in.assign(h, h + next.size() * H);
    } else {
      next.assign(tokens.begin() + s.row, tokens.begin() + s.row + s.rows);
      in = st.mtp_hidden();
      in.insert(in.end(), h, h + static_cast<size_t>(s.rows - 1) * H);
    }
    if (!next.empty()) mtp_rows(next, in, {&st.storage(), 0, static_cast<int64_t>(next.size()), first}, kind, false, nullptr);
    st.mtp_hidden().assign(h + static_cast<size_t>(s.rows - 1) * H, h + static_cast<size_t>(s.rows) * H);
  }
}

std::vector<float> Qwen35MoeForward::mtp_rows(std::span<const int32_t> next_tokens, std::span<const float> hidden,
                                              SeqSlice at, RowKind kind, bool logits, std::vector<float>* hidden_out) {
  Backend& B = *backend_;
  const MtpWeights& m = *weights_.mtp;
  const int64_t n = static_cast<int64_t>(next_tokens.size()), H = cfg_.hidden_size, L = cfg_.num_layers;
  const float eps = static_cast<float>(cfg_.rms_norm_eps);
  at.state->truncate(L, at.position);
  // fc reads [norm(embedding) | norm(hidden)]
  Tensor e = B.embed(weights_.embed, next_tokens), hs = B.from_host(hidden, n, H);
  B.rmsnorm(e, m.embed_norm, eps, e);
  B.rmsnorm(hs, m.hidden_norm, eps, hs);
  const std::vector<float> ev = B.to_host(e), hv = B.to_host(hs);
  std::vector<float> cat(static_cast<size_t>(n * 2 * H));
  for (int64_t r = 0; r < n; ++r) {
    std::copy_n(ev.begin() + r * H, H, cat.begin() + r * 2 * H);
    std::copy_n(hv.begin() + r * H, H, cat.begin() + r * 2 * H + H);
  }
  Tensor c = B.from_host(cat, n, 2 * H), x = B.tensor(n, H), h = B.tensor(n, H), out = B.tensor(n, H);
  B.matmul(c, m.fc, x, kind);
  B.rmsnorm(x, m.layer.input_norm, eps, h);
  attention(L, std::span<const SeqSlice>(&at, 1), kind, h, out);
  if (!logits) return {};
  // only the last row goes on
  const int64_t last[] = {n - 1};
  Tensor xl = B.gather(x, last), ol = B.gather(out, last), hl = B.tensor(1, H), ml = B.tensor(1, H);
  B.add_rmsnorm(xl, ol, m.layer.post_attention_norm, eps, hl);
  B.moe(hl, experts_[L], cfg_.experts_per_token, ml, RowKind::Tokens);
  B.add(xl, ml);
  Tensor normed = B.tensor(1, H), lg = B.tensor(1, cfg_.vocab_size);
  B.rmsnorm(xl, m.final_norm, eps, normed);
  B.matmul(normed, weights_.lm_head, lg, RowKind::Tokens);
  if (hidden_out) *hidden_out = B.to_host(normed);
  return B.to_host(lg);
}

std::vector<int32_t> Qwen35MoeForward::draft(SequenceState& state, int32_t next, int64_t k) {
  check_tokens(std::span<const int32_t>(&next, 1));
  if (!keep_mtp_) throw Error("draft: the MTP head is not kept up (keep_mtp)");
  if (state.position() == 0 || state.mtp_hidden().empty())
    throw Error("draft: the sequence has no consumed position for the MTP head to start from");
  std::vector<int32_t> out;
  std::vector<float> hidden = state.mtp_hidden();
  int32_t tok = next;
  for (int64_t j = 0; j < k; ++j) {
    const SeqSlice at{&state.storage(), 0, 1, state.position() - 1 + j};
    const std::vector<float> logits = mtp_rows(std::span<const int32_t>(&tok, 1), hidden, at, RowKind::Tokens, true, &hidden);
    tok = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    out.push_back(tok);
  }
  return out;
}

std::vector<float> Qwen35MoeForward::verify(std::span<const int32_t> tokens, SequenceState& state, Undo& undo) {
  const std::vector<int32_t> rows(tokens.begin(), tokens.end());
  SequenceState* const states[] = {&state};
  return verify_batch(std::span<const std::vector<int32_t>>(&rows, 1), states, std::span<Undo>(&undo, 1));
}

std::vector<float> Qwen35MoeForward::verify_batch(std::span<const std::vector<int32_t>> rows,
                                                  std::span<SequenceState* const> states, std::span<Undo> undos) {
  if (rows.size() != states.size() || undos.size() != states.size())
    throw Error("verify_batch: " + std::to_string(rows.size()) + " row sets for " + std::to_string(states.size()) +
                " sequences and " + std::to_string(undos.size()) + " undos");
  std::vector<int32_t> tokens;
  std::vector<Segment> segs;
  for (size_t i = 0; i < rows.size(); ++i) {
    check_tokens(rows[i]);
    segs.push_back({states[i], static_cast<int64_t>(tokens.size()), static_cast<int64_t>(rows[i].size())});
    tokens.insert(tokens.end(), rows[i].begin(), rows[i].end());
  }
  for (size_t i = 0; i < rows.size(); ++i) {
    Undo& u = undos[i];
    u = Undo{};
    u.position = states[i]->position();
    u.rows = segs[i].rows;
    u.recurrent = states[i]->storage().clone_recurrent();
    u.mtp_hidden = states[i]->mtp_hidden();
  }
  DeltaInputs rec;
  for (auto* v : {&rec.qkv, &rec.beta, &rec.decay}) v->resize(static_cast<size_t>(cfg_.num_layers));
  struct Scope {  // the Gated DeltaNet layers keep their inputs while this call runs
    DeltaInputs*& at;
    Scope(DeltaInputs*& a, DeltaInputs* r) : at(a) { at = r; }
    ~Scope() { at = nullptr; }
  };
  std::vector<float> hidden;
  Tensor logits;
  {
    Scope scope(recording_, &rec);
    logits = run_logits(tokens, segs, ForwardMode::Decode, LogitsFor::AllPositions, keep_mtp_ ? &hidden : nullptr);
  }
  // each sequence's share of what was kept
  const size_t H = static_cast<size_t>(cfg_.hidden_size);
  for (size_t i = 0; i < rows.size(); ++i) {
    Undo& u = undos[i];
    const size_t r0 = static_cast<size_t>(segs[i].row), n = static_cast<size_t>(segs[i].rows);
    auto share = [&](const std::vector<float>& all, std::vector<float>& mine) {
      if (all.empty()) return;
      const size_t cols = all.size() / tokens.size();
      mine.assign(all.begin() + static_cast<std::ptrdiff_t>(r0 * cols), all.begin() + static_cast<std::ptrdiff_t>((r0 + n) * cols));
    };
    for (auto [all, mine] : {std::pair{&rec.qkv, &u.inputs.qkv}, std::pair{&rec.beta, &u.inputs.beta},
                             std::pair{&rec.decay, &u.inputs.decay}}) {
      mine->resize(all->size());
      for (size_t l = 0; l < all->size(); ++l) share((*all)[l], (*mine)[l]);
    }
    if (!hidden.empty()) u.hidden.assign(hidden.begin() + static_cast<std::ptrdiff_t>(r0 * H), hidden.begin() + static_cast<std::ptrdiff_t>((r0 + n) * H));
  }
  return backend_->to_host(logits);
}

void Qwen35MoeForward::rewind(SequenceState& state, const Undo& undo, int64_t keep) {
  if (keep < 0 || keep > undo.rows || !undo.recurrent)
    throw Error("rewind: cannot keep " + std::to_string(keep) + " of " + std::to_string(undo.rows) + " rows");
  if (state.position() != undo.position + undo.rows)
    throw Error("rewind: the state has moved since the verify step it would take back");
  if (keep == undo.rows) return;
  Backend& B = *backend_;
  StateStorage& st = state.storage();
  st.restore_recurrent(*undo.recurrent);
  const SeqSlice at{&st, 0, keep, undo.position};
  for (int64_t i = 0; i < cfg_.num_layers; ++i) {
    if (weights_.layers[i].kind != LayerKind::LinearAttention) {
      st.truncate(i, undo.position + keep);
      continue;
    }
    if (keep == 0) continue;
    // the kept rows' recurrent steps again, on the inputs they had
    const GatedDeltaNetWeights& g = weights_.layers[i].gdn;
    const int64_t C = cfg_.gdn_conv_dim(), Hv = cfg_.linear_num_value_heads, VD = cfg_.gdn_value_dim();
    auto rows_of = [keep](const std::vector<float>& v, int64_t cols) {
      return std::span<const float>(v.data(), static_cast<size_t>(keep * cols));
    };
    Tensor qkv = B.from_host(rows_of(undo.inputs.qkv[i], C), keep, C);
    Tensor beta = B.wide_from_host(rows_of(undo.inputs.beta[i], Hv), keep, Hv);
    Tensor decay = B.wide_from_host(rows_of(undo.inputs.decay[i], Hv), keep, Hv);
    Tensor mixed = B.tensor(keep, C), o = B.tensor(keep, VD);
    const std::span<const SeqSlice> seqs(&at, 1);
    B.delta_inputs(i, seqs, qkv, g.conv, g.neg_exp_a, g.dt_bias, delta_, mixed, beta, decay);
    B.delta_rule(i, seqs, mixed, decay, beta, delta_, RowKind::Tokens, o);
  }
  if (keep_mtp_) {
    // the head's cache holds the positions before the last kept one
    const int64_t H = cfg_.hidden_size;
    st.truncate(cfg_.num_layers, std::max<int64_t>(0, undo.position + keep - 1));
    if (keep == 0)
      state.mtp_hidden() = undo.mtp_hidden;
    else
      state.mtp_hidden().assign(undo.hidden.begin() + (keep - 1) * H, undo.hidden.begin() + keep * H);
  }
  state.rewind_to(undo.position + keep);
}

}  // namespace lily
