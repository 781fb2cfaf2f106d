#include "lily/backend/cpu/thread_pool.h"

#include <algorithm>
#include <chrono>
#include <memory>

#include <pthread.h>
#include <signal.h>

namespace lily::cpu {

std::thread start_thread_without_signals(std::function<void()> body) {
  // Threads inherit the creating thread's signal mask, so it is set around the creation.
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, &old);
  std::thread t(std::move(body));
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  return t;
}

namespace {
inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// Spins until done() or about `budget` has passed; true when done() came true.
template <class Done>
bool spin_until(Done done, std::chrono::microseconds budget) {
  const auto until = std::chrono::steady_clock::now() + budget;
  while (true) {
    for (int i = 0; i < 64; ++i) {
      if (done()) return true;
      cpu_relax();
    }
    if (std::chrono::steady_clock::now() >= until) return done();
    std::this_thread::yield();  // lets a thread that shares this core (more threads than cores) go on
  }
}

constexpr std::chrono::microseconds kSpin{2000};
}  // namespace

ThreadPool::ThreadPool(int threads) {
  for (int i = 1; i < std::max(threads, 1); ++i)
    workers_.push_back(start_thread_without_signals([this] { worker_loop(); }));
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::run_chunks() {
  while (true) {
    const int64_t b = next_.fetch_add(chunk_, std::memory_order_relaxed);
    if (b >= n_) return;
    (*job_)(b, std::min(n_, b + chunk_));
  }
}

void ThreadPool::worker_loop() {
  uint64_t seen = 0;
  while (true) {
    auto called = [&] { return stop_.load(std::memory_order_relaxed) || generation_.load(std::memory_order_acquire) != seen; };
    if (!spin_until(called, kSpin)) {
      std::unique_lock<std::mutex> lock(mu_);
      ++sleepers_;
      wake_.wait(lock, called);
      --sleepers_;
    }
    if (stop_) return;
    seen = generation_.load(std::memory_order_acquire);
    run_chunks();
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      std::lock_guard<std::mutex> lock(mu_);
      if (caller_sleeps_) done_.notify_one();
    }
  }
}

void ThreadPool::parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  const int64_t parts = std::min<int64_t>(size(), std::max<int64_t>(1, n / std::max<int64_t>(grain, 1)));
  if (parts <= 1 || workers_.empty()) {
    fn(0, n);
    return;
  }
  std::lock_guard<std::mutex> call(call_mu_);
  // A few chunks per thread, so one that is slowed (by another process, or
  // by a busier part of the range) hands its share to the others.
  const int64_t chunk = std::max<int64_t>(std::max<int64_t>(grain, 1), (n + 4 * parts - 1) / (4 * parts));
  job_ = &fn;
  n_ = n;
  chunk_ = chunk;
  next_.store(0, std::memory_order_relaxed);
  pending_.store(static_cast<int>(workers_.size()), std::memory_order_relaxed);
  {
    std::lock_guard<std::mutex> lock(mu_);
    generation_.fetch_add(1, std::memory_order_release);
    if (sleepers_ > 0) wake_.notify_all();
  }
  run_chunks();
  auto all_done = [&] { return pending_.load(std::memory_order_acquire) == 0; };
  if (spin_until(all_done, kSpin)) return;
  std::unique_lock<std::mutex> lock(mu_);
  caller_sleeps_ = true;
  done_.wait(lock, all_done);
  caller_sleeps_ = false;
}

}  // namespace lily::cpu
