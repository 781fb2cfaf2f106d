// Runs many requests on one model at once (continuous batching): a worker
// thread takes requests from a bounded queue, prefills waiting prompts in
// chunks (several prompts' pieces in one call) between decode steps so
// running streams keep flowing, and advances every decoding sequence with
// one batched step, sequences joining and leaving between steps. Prompts resume from the prefix cache. Each request's
// events (text, log-probabilities, the end) go to its Ticket.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "lily/runtime/continuation.h"
#include "lily/runtime/engine.h"
#include "lily/model/qwen35moe.h"
#include "lily/runtime/prefix_cache.h"

namespace lily {

struct Job {
  std::vector<int32_t> prompt;
  ContinuationParams params;
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
};

struct JobEvent {
  enum class Kind { Text, Done, Failed } kind = Kind::Text;
  std::string text;
  std::vector<TokenLogprob> logprobs;
  // Done: "stop", "length", "cancelled" or "timeout"
  std::string finish_reason;
  std::string stop_sequence;            // Done: the stop string that ended the answer, if one did
  std::vector<int32_t> generated;       // Done: every token drawn (an API may hand them back)
  int64_t prompt_tokens = 0, cached_tokens = 0, completion_tokens = 0;
  double prefill_seconds = 0, decode_seconds = 0;
  std::string error;  // Failed
};

// A submitted job: the client reads its events and may cancel it.
class Ticket {
 public:
  // Waits up to `wait` for the next event; false when none came.
  bool next(JobEvent& ev, std::chrono::milliseconds wait);
  void cancel() { cancelled_ = true; }
  bool cancelled() const { return cancelled_; }

 private:
  friend class Scheduler;
  void push(JobEvent ev);
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<JobEvent> events_;
  std::atomic<bool> cancelled_{false};
};

struct SchedulerOptions {
  size_t max_sequences = 16;     // decoding at once
  size_t max_queue = 64;         // waiting beyond those
  int64_t prefill_chunk = 256;   // prompt tokens (of all waiting prompts) between two decode steps
  int64_t checkpoint_every = 1024;  // cache a long prompt's state this often (a multiple of 64)
  size_t cache_bytes = size_t(4) << 30;
  bool cache_enabled = true;
  int64_t mtp = 0;               // speculative decoding: drafts a step from the MTP head (0: off)
};

class QueueFull : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class Scheduler {
 public:
  Scheduler(const Engine& engine, SchedulerOptions opt);
  ~Scheduler();  // ends the worker; unfinished jobs end as "cancelled"

  // Throws QueueFull when the queue is full, lily::Error for an empty prompt.
  std::shared_ptr<Ticket> submit(Job job);

  struct Stats {
    uint64_t requests = 0, prompt_tokens = 0, cached_tokens = 0, generated_tokens = 0, decode_steps = 0;
    size_t running = 0, queued = 0;
    double prefill_seconds = 0, decode_seconds = 0;
    PrefixCache::Stats cache;
  };
  Stats stats() const;
  const SchedulerOptions& options() const { return opt_; }

 private:
  struct Slot;
  void loop();
  void admit();
  bool prefill_some();
  void decode_all();
  void speculate_all(std::vector<Slot*>& active);
  void finish(Slot& s, const std::string& reason, const std::string& stop_sequence = "");
  void deliver(Slot& s, Continuation::Step& st);
  void drop_ended();
  std::vector<int64_t> checkpoints_of(int64_t prompt_len) const;

  const Engine& engine_;
  SchedulerOptions opt_;
  Qwen35MoeForward fwd_;
  PrefixCache cache_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::pair<Job, std::shared_ptr<Ticket>>> queue_;
  bool stopping_ = false;
  Stats stats_;

  std::vector<std::unique_ptr<Slot>> slots_;  // owned by the worker
  std::thread worker_;
};

}  // namespace lily
