#include "lily/backend/cpu/thread_pool.h"

#include <algorithm>
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

ThreadPool::ThreadPool(int threads) {
  for (int i = 1; i < std::max(threads, 1); ++i)
    workers_.push_back(start_thread_without_signals([this, i] { worker_loop(i); }));
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::worker_loop(int index) {
  uint64_t seen = 0;
  while (true) {
    const std::function<void(int64_t, int64_t)>* job;
    int64_t n, chunk;
    {
      std::unique_lock<std::mutex> lock(mu_);
      wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      job = job_;
      n = n_;
      chunk = chunk_;
    }
    const int64_t b = index * chunk, e = std::min(n, b + chunk);
    if (b < e) (*job)(b, e);
    std::lock_guard<std::mutex> lock(mu_);
    if (--pending_ == 0) done_.notify_one();
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
  // Static split: part i covers [i*chunk, (i+1)*chunk); the caller takes part 0.
  const int64_t chunk = (n + parts - 1) / parts;
  {
    std::lock_guard<std::mutex> lock(mu_);
    job_ = &fn;
    n_ = n;
    chunk_ = chunk;
    pending_ = static_cast<int>(workers_.size());
    ++generation_;
  }
  wake_.notify_all();
  fn(0, std::min(n, chunk));
  std::unique_lock<std::mutex> lock(mu_);
  done_.wait(lock, [&] { return pending_ == 0; });
}

namespace {
std::unique_ptr<ThreadPool>& pool_slot() {
  static std::unique_ptr<ThreadPool> p;
  return p;
}
}  // namespace

ThreadPool& ThreadPool::global() {
  auto& p = pool_slot();
  if (!p) p = std::make_unique<ThreadPool>(static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
  return *p;
}

void ThreadPool::set_threads(int n) { pool_slot() = std::make_unique<ThreadPool>(std::max(1, n)); }

}  // namespace lily::cpu
