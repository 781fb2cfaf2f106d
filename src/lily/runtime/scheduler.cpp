#include "lily/runtime/scheduler.h"

#include <algorithm>

#include "lily/backend/cpu/thread_pool.h"
#include "lily/error.h"

namespace lily {

using clock_type = std::chrono::steady_clock;

namespace {
double seconds_since(clock_type::time_point t) {
  return std::chrono::duration<double>(clock_type::now() - t).count();
}
}  // namespace

bool Ticket::next(JobEvent& ev, std::chrono::milliseconds wait) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!cv_.wait_for(lock, wait, [&] { return !events_.empty(); })) return false;
  ev = std::move(events_.front());
  events_.pop_front();
  return true;
}

void Ticket::push(JobEvent ev) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    events_.push_back(std::move(ev));
  }
  cv_.notify_all();
}

struct Scheduler::Slot {
  Slot(const Engine& e, const Qwen35MoeForward& fwd, Job j, std::shared_ptr<Ticket> t)
      : job(std::move(j)), ticket(std::move(t)), state(fwd.new_state()), cont(e, job.params, job.prompt) {}
  Job job;
  std::shared_ptr<Ticket> ticket;
  SequenceState state;
  Continuation cont;
  std::vector<int64_t> checkpoints;
  int64_t cached = 0;
  int32_t pending = -1;  // token to feed in the next decode step
  bool decoding = false, ended = false;
  clock_type::time_point admitted = clock_type::now(), first_token;
  double prefill_seconds = 0;
};

Scheduler::Scheduler(const Engine& engine, SchedulerOptions opt)
    : engine_(engine), opt_(opt), fwd_(engine.model(), engine.backend()), cache_(opt.cache_enabled ? opt.cache_bytes : 0) {
  const int64_t c = Qwen35MoeForward::kDeltaChunk;
  opt_.prefill_chunk = std::max<int64_t>(c, opt_.prefill_chunk / c * c);
  opt_.checkpoint_every = std::max<int64_t>(c, opt_.checkpoint_every / c * c);
  opt_.max_sequences = std::max<size_t>(1, opt_.max_sequences);
  if (opt_.mtp > 0) fwd_.keep_mtp(true);  // every state, cached ones included, keeps the head up
  worker_ = cpu::start_thread_without_signals([this] { loop(); });
}

Scheduler::~Scheduler() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  worker_.join();
  for (auto& s : slots_)
    if (!s->ended) finish(*s, "cancelled");
  for (auto& [job, ticket] : queue_) {
    JobEvent ev;
    ev.kind = JobEvent::Kind::Done;
    ev.finish_reason = "cancelled";
    ticket->push(std::move(ev));
  }
}

std::shared_ptr<Ticket> Scheduler::submit(Job job) {
  if (job.prompt.empty()) throw Error("the prompt is empty");
  auto ticket = std::make_shared<Ticket>();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (queue_.size() >= opt_.max_queue)
      throw QueueFull("the server is busy: " + std::to_string(opt_.max_queue) + " requests are already waiting");
    queue_.emplace_back(std::move(job), ticket);
    ++stats_.requests;
    stats_.queued = queue_.size();
  }
  cv_.notify_all();
  return ticket;
}

Scheduler::Stats Scheduler::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  Stats s = stats_;
  s.cache = cache_.stats();
  return s;
}

std::vector<int64_t> Scheduler::checkpoints_of(int64_t len) const {
  // Multiples of the delta-rule chunk, strictly inside the prompt: every
  // checkpoint_every tokens, and the last one before the prompt's end (what
  // the next turn of the same conversation resumes from).
  const int64_t c = Qwen35MoeForward::kDeltaChunk;
  std::vector<int64_t> at;
  for (int64_t p = opt_.checkpoint_every; p < len; p += opt_.checkpoint_every) at.push_back(p);
  const int64_t last = (len - 1) / c * c;
  if (last > 0 && (at.empty() || at.back() != last)) at.push_back(last);
  return at;
}

void Scheduler::loop() {
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stopping_ || !queue_.empty() || !slots_.empty(); });
      if (stopping_) return;
    }
    admit();
    const auto now = clock_type::now();
    for (auto& s : slots_) {
      if (s->ended) continue;
      if (s->ticket->cancelled()) finish(*s, "cancelled");
      else if (now > s->job.deadline) finish(*s, "timeout");
    }
    drop_ended();
    try {
      prefill_some();
      decode_all();
    } catch (const std::exception& e) {
      // Inputs are checked before they get here; whatever still fails ends
      // the requests in flight with the reason instead of taking the server down.
      for (auto& s : slots_) {
        if (s->ended) continue;
        JobEvent ev;
        ev.kind = JobEvent::Kind::Failed;
        ev.error = e.what();
        s->ticket->push(std::move(ev));
        s->ended = true;
      }
    }
    drop_ended();
  }
}

void Scheduler::admit() {
  std::vector<std::pair<Job, std::shared_ptr<Ticket>>> taken;
  {
    std::lock_guard<std::mutex> lock(mu_);
    while (!queue_.empty() && slots_.size() + taken.size() < opt_.max_sequences) {
      taken.push_back(std::move(queue_.front()));
      queue_.pop_front();
    }
    stats_.queued = queue_.size();
  }
  for (auto& [job, ticket] : taken) {
    auto slot = std::make_unique<Slot>(engine_, fwd_, std::move(job), std::move(ticket));
    const int64_t len = static_cast<int64_t>(slot->job.prompt.size());
    slot->checkpoints = checkpoints_of(len);
    if (opt_.cache_enabled) slot->cached = static_cast<int64_t>(cache_.restore(slot->job.prompt, slot->state));
    {
      std::lock_guard<std::mutex> lock(mu_);
      stats_.prompt_tokens += len;
      stats_.cached_tokens += slot->cached;
    }
    slots_.push_back(std::move(slot));
  }
  std::lock_guard<std::mutex> lock(mu_);
  stats_.running = slots_.size();
}

bool Scheduler::prefill_some() {
  // Pieces of waiting prompts, oldest first, up to prefill_chunk tokens in
  // all, go through one forward call: every weight is read once for all of
  // them. A piece ends at a multiple of the delta-rule chunk (or at its
  // prompt's end) and at the next checkpoint, which keeps a resumed prompt
  // bit-exact; the first piece always gets at least one chunk.
  const int64_t c = Qwen35MoeForward::kDeltaChunk;
  std::vector<Slot*> taking;
  std::vector<std::vector<int32_t>> pieces;
  std::vector<SequenceState*> states;
  int64_t budget = opt_.prefill_chunk;
  for (auto& sp : slots_) {
    Slot& s = *sp;
    if (s.ended || s.decoding) continue;
    const auto& prompt = s.job.prompt;
    const int64_t len = static_cast<int64_t>(prompt.size()), pos = s.state.position();
    int64_t room = budget / c * c;
    if (len - pos <= budget) room = len - pos;  // a prompt's end may use up the rest
    if (taking.empty()) room = std::max(room, std::min(len - pos, c));
    int64_t end = pos + room;
    for (int64_t cp : s.checkpoints)
      if (cp > pos) {
        end = std::min(end, cp);
        break;
      }
    if (end <= pos) break;
    taking.push_back(&s);
    pieces.emplace_back(prompt.begin() + pos, prompt.begin() + end);
    states.push_back(&s.state);
    budget -= end - pos;
    if (budget <= 0) break;
  }
  if (taking.empty()) return false;
  const auto t0 = clock_type::now();
  const std::vector<float> logits = fwd_.prefill_batch(pieces, states);
  const double dt = seconds_since(t0);
  {
    std::lock_guard<std::mutex> lock(mu_);
    stats_.prefill_seconds += dt;
  }
  const int64_t V = engine_.model().config().vocab_size;
  for (size_t i = 0; i < taking.size(); ++i) {
    Slot& s = *taking[i];
    const auto& prompt = s.job.prompt;
    const int64_t end = s.state.position();
    s.prefill_seconds += dt;
    if (opt_.cache_enabled && std::find(s.checkpoints.begin(), s.checkpoints.end(), end) != s.checkpoints.end())
      cache_.insert(std::vector<int32_t>(prompt.begin(), prompt.begin() + end), s.state);
    if (end < static_cast<int64_t>(prompt.size())) continue;
    s.decoding = true;
    s.first_token = clock_type::now();
    std::vector<float> row(logits.begin() + i * V, logits.begin() + (i + 1) * V);
    Continuation::Step st = s.cont.next(row);
    deliver(s, st);
  }
  return true;
}

void Scheduler::decode_all() {
  std::vector<Slot*> active;
  for (auto& s : slots_)
    if (!s->ended && s->decoding && s->pending >= 0) active.push_back(s.get());
  if (active.empty()) return;
  if (opt_.mtp > 0) return speculate_all(active);
  const auto t0 = clock_type::now();
  std::vector<int32_t> tokens;
  std::vector<SequenceState*> states;
  for (Slot* s : active) {
    tokens.push_back(s->pending);
    states.push_back(&s->state);
  }
  const std::vector<float> logits = fwd_.decode_batch(tokens, states);
  const int64_t V = engine_.model().config().vocab_size;
  for (size_t i = 0; i < active.size(); ++i) {
    std::vector<float> row(logits.begin() + i * V, logits.begin() + (i + 1) * V);
    Continuation::Step st = active[i]->cont.next(row);
    deliver(*active[i], st);
  }
  std::lock_guard<std::mutex> lock(mu_);
  stats_.decode_steps++;
  stats_.decode_seconds += seconds_since(t0);
}

void Scheduler::speculate_all(std::vector<Slot*>& active) {
  // Each sequence's pending token and the head's drafts after it, verified
  // in one call; a sequence reads its rows while the token it chooses is the
  // draft the next row followed, then keeps the rows it read.
  const auto t0 = clock_type::now();
  std::vector<std::vector<int32_t>> rows, drafts;
  std::vector<SequenceState*> states;
  for (Slot* s : active) {
    drafts.push_back(fwd_.draft(s->state, s->pending, opt_.mtp));
    rows.push_back({s->pending});
    rows.back().insert(rows.back().end(), drafts.back().begin(), drafts.back().end());
    states.push_back(&s->state);
  }
  std::vector<Qwen35MoeForward::Undo> undos(active.size());
  const std::vector<float> logits = fwd_.verify_batch(rows, states, undos);
  const int64_t V = engine_.model().config().vocab_size;
  size_t at = 0;
  for (size_t i = 0; i < active.size(); ++i) {
    Slot& s = *active[i];
    int64_t keep = 0;
    for (size_t r = 0; r < rows[i].size(); ++r) {
      std::vector<float> row(logits.begin() + static_cast<int64_t>(at + r) * V,
                             logits.begin() + static_cast<int64_t>(at + r + 1) * V);
      Continuation::Step st = s.cont.next(row);
      deliver(s, st);
      keep = static_cast<int64_t>(r) + 1;
      if (s.ended || r == drafts[i].size() || st.feed != drafts[i][r]) break;
    }
    fwd_.rewind(s.state, undos[i], keep);
    at += rows[i].size();
  }
  std::lock_guard<std::mutex> lock(mu_);
  stats_.decode_steps++;
  stats_.decode_seconds += seconds_since(t0);
}

void Scheduler::deliver(Slot& s, Continuation::Step& st) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stats_.generated_tokens++;
  }
  if (!st.text.empty() || st.logprob) {
    JobEvent ev;
    ev.text = std::move(st.text);
    if (st.logprob) ev.logprobs.push_back(std::move(*st.logprob));
    s.ticket->push(std::move(ev));
  }
  s.pending = st.feed;
  if (st.feed < 0) finish(s, st.finish_reason, st.stop_sequence);
}

void Scheduler::finish(Slot& s, const std::string& reason, const std::string& stop_sequence) {
  JobEvent ev;
  ev.kind = JobEvent::Kind::Done;
  ev.finish_reason = reason;
  ev.stop_sequence = stop_sequence;
  ev.generated = s.cont.tokens();
  ev.prompt_tokens = static_cast<int64_t>(s.job.prompt.size());
  ev.cached_tokens = s.cached;
  ev.completion_tokens = s.cont.generated();
  ev.prefill_seconds = s.prefill_seconds;
  ev.decode_seconds = s.decoding ? seconds_since(s.first_token) : 0;
  s.ticket->push(std::move(ev));
  s.ended = true;
}

void Scheduler::drop_ended() {
  // a finished or abandoned sequence frees its state here
  slots_.erase(std::remove_if(slots_.begin(), slots_.end(), [](const auto& s) { return s->ended; }), slots_.end());
  std::lock_guard<std::mutex> lock(mu_);
  stats_.running = slots_.size();
}

}  // namespace lily
