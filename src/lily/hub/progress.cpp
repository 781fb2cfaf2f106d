#include "lily/hub/progress.h"

#include "lily/units.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace lily::hub {

using Clock = std::chrono::steady_clock;

Progress::Progress(std::ostream& out, bool terminal) : out_(out), terminal_(terminal), started_(Clock::now()) {}

Progress::~Progress() { finish(); }

std::string Progress::human_bytes(double b) { return lily::human_bytes(b, 1); }

std::string Progress::human_time(double s) {
  if (!std::isfinite(s) || s < 0) return "--:--";
  const long t = std::lround(std::min(s, 359999.0));
  char buf[32];
  if (t >= 3600)
    std::snprintf(buf, sizeof buf, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
  else
    std::snprintf(buf, sizeof buf, "%ld:%02ld", t / 60, t % 60);
  return buf;
}

void Progress::start(uint64_t bytes, size_t files) {
  std::lock_guard lock(mu_);
  total_ = bytes;
  started_ = Clock::now();
  if (!terminal_) {
    out_ << "fetching " << files << " file" << (files == 1 ? "" : "s") << ", " << human_bytes(double(bytes)) << "\n";
    out_.flush();
    return;
  }
  if (!painter_.joinable()) painter_ = std::thread([this] { loop(); });
}

int Progress::begin_file(const std::string& name, uint64_t size, uint64_t done) {
  std::lock_guard lock(mu_);
  files_.push_back({name, size, done, done, Clock::now(), true});
  return static_cast<int>(files_.size() - 1);
}

void Progress::advance(int slot, uint64_t bytes) {
  std::lock_guard lock(mu_);
  files_[slot].done += bytes;
  done_ += bytes;
}

void Progress::rewind(int slot, uint64_t bytes) {
  std::lock_guard lock(mu_);
  File& f = files_[slot];
  bytes = std::min(bytes, f.done);
  f.done -= bytes;
  f.start_done = std::min(f.start_done, f.done);
  done_ -= std::min(bytes, done_);
}

void Progress::end_file(int slot, const std::string& outcome) {
  std::lock_guard lock(mu_);
  File& f = files_[slot];
  f.active = false;
  const double secs = std::chrono::duration<double>(Clock::now() - f.started).count();
  const std::string line = f.name + ": " + outcome + " (" + human_bytes(double(f.size)) +
                           (f.done > f.start_done ? ", " + human_bytes((f.done - f.start_done) / std::max(secs, 1e-3)) + "/s" : "") +
                           ")";
  if (terminal_) {
    // Printed above the bars, which are redrawn below it.
    if (drawn_lines_) out_ << "\x1b[" << drawn_lines_ << "F\x1b[J";
    drawn_lines_ = 0;
    out_ << line << "\n";
    draw_locked();
  } else {
    out_ << line << "\n";
  }
  out_.flush();
}

std::string Progress::bar_line(const std::string& name, uint64_t done, uint64_t size, double rate) const {
  const double frac = size ? std::min(1.0, double(done) / double(size)) : 1.0;
  constexpr int kWidth = 24;
  const int full = static_cast<int>(frac * kWidth);
  std::string bar(kWidth + 2, ' ');
  bar.front() = '[', bar.back() = ']';
  std::fill_n(bar.begin() + 1, full, '#');
  std::string label = name.size() > 32 ? std::string("...").append(name, name.size() - 29, 29) : name;
  label.resize(32, ' ');
  char pct[16];
  std::snprintf(pct, sizeof pct, "%3.0f%%", frac * 100);
  const double left = rate > 0 ? double(size - std::min(done, size)) / rate : -1;
  return label + " " + bar + " " + pct + "  " + human_bytes(double(done)) + " / " + human_bytes(double(size)) + "  " +
         human_bytes(rate) + "/s  " + human_time(left);
}

void Progress::draw_locked() {
  if (drawn_lines_) out_ << "\x1b[" << drawn_lines_ << "F\x1b[J";
  drawn_lines_ = 0;
  const auto now = Clock::now();
  for (const File& f : files_) {
    if (!f.active) continue;
    const double secs = std::chrono::duration<double>(now - f.started).count();
    out_ << bar_line(f.name, f.done, f.size, secs > 0 ? (f.done - f.start_done) / secs : 0) << "\n";
    ++drawn_lines_;
  }
  const double secs = std::chrono::duration<double>(now - started_).count();
  out_ << bar_line("total", done_, total_, secs > 0 ? done_ / secs : 0) << "\n";
  ++drawn_lines_;
  out_.flush();
}

void Progress::loop() {
  std::unique_lock lock(mu_);
  while (!stop_) {
    draw_locked();
    cv_.wait_for(lock, std::chrono::milliseconds(200), [this] { return stop_; });
  }
}

void Progress::finish() {
  {
    std::lock_guard lock(mu_);
    if (stop_) return;
    stop_ = true;
    if (terminal_ && painter_.joinable()) draw_locked();
  }
  cv_.notify_all();
  if (painter_.joinable()) painter_.join();
}

}  // namespace lily::hub
