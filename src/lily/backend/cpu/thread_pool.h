// A persistent pool of worker threads for data-parallel loops: the threads
// are started once and woken per call, so a decode step's many small
// matrix products do not pay thread start-up each time.
#pragma once

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
  // least `grain`, on the workers and the calling thread; returns when all are done.
  void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

  // The process-wide pool; its size is set by set_threads (default: hardware threads).
  static ThreadPool& global();
  static void set_threads(int n);

 private:
  void worker_loop(int index);
  std::vector<std::thread> workers_;
  std::mutex call_mu_;  // one parallel loop at a time
  std::mutex mu_;
  std::condition_variable wake_, done_;
  const std::function<void(int64_t, int64_t)>* job_ = nullptr;
  int64_t n_ = 0, chunk_ = 0;
  uint64_t generation_ = 0;
  int pending_ = 0;
  bool stop_ = false;
};

}  // namespace lily::cpu
