// A persistent pool of worker threads for data-parallel loops: the threads
// are started once and woken per call, so a decode step's many small
// matrix products do not pay thread start-up each time. Between calls a
// worker spins for a moment before it sleeps, because a decode step makes
// hundreds of calls tens of microseconds apart and waking a sleeping thread
// costs about as much as one of them.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace lily::cpu {

// A thread that never takes asynchronous signals: a Ctrl-C must reach the
// thread that waits on the terminal (it interrupts that thread's read), not
// a worker.
std::thread start_thread_without_signals(std::function<void()> body);

class ThreadPool {
 public:
  explicit ThreadPool(int threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return static_cast<int>(workers_.size()) + 1; }
  // Calls fn(begin, end) on disjoint ranges covering [0, n), in chunks of at
  // least `grain` taken by whichever thread is free (the workers and the
  // calling thread); returns when all are done.
  void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);


 private:
  void worker_loop();
  void run_chunks();
  std::vector<std::thread> workers_;
  std::mutex call_mu_;  // one parallel loop at a time
  std::mutex mu_;       // guards sleeping and waking
  std::condition_variable wake_, done_;
  const std::function<void(int64_t, int64_t)>* job_ = nullptr;
  int64_t n_ = 0, chunk_ = 0;
  std::atomic<int64_t> next_{0};         // the next chunk's start
  std::atomic<uint64_t> generation_{0};  // one more per call
  std::atomic<int> pending_{0};          // workers still in the current call
  int sleepers_ = 0;                     // workers blocked on wake_ (under mu_)
  bool caller_sleeps_ = false;           // the caller blocked on done_ (under mu_)
  std::atomic<bool> stop_{false};
};

}  // namespace lily::cpu
