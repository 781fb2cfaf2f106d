// What `lily pull` shows while it works. On a terminal: a bar for each file
// in flight and one for the whole, each with its bytes, speed and time left,
// redrawn in place a few times a second. Elsewhere (a log, a pipe): one line
// per file when it is done, and no escape codes.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

namespace lily::hub {

class Progress {
 public:
  Progress(std::ostream& out, bool terminal);
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  // The whole job: `bytes` still to fetch over `files` files.
  void start(uint64_t bytes, size_t files);
  // A file begins (`done` bytes already on disk from an earlier attempt); returns its slot.
  int begin_file(const std::string& name, uint64_t size, uint64_t done);
  void advance(int slot, uint64_t bytes);
  // Takes back bytes that were thrown away (a server that ignored a range).
  void rewind(int slot, uint64_t bytes);
  void end_file(int slot, const std::string& outcome);
  // Stops redrawing and leaves the last state on screen.
  void finish();

  static std::string human_bytes(double bytes);
  static std::string human_time(double seconds);

 private:
  struct File {
    std::string name;
    uint64_t size = 0, done = 0, start_done = 0;
    std::chrono::steady_clock::time_point started;
    bool active = true;
  };
  void loop();
  void draw_locked();
  std::string bar_line(const std::string& name, uint64_t done, uint64_t size, double rate) const;

  std::ostream& out_;
  const bool terminal_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<File> files_;
  uint64_t total_ = 0, done_ = 0;
  std::chrono::steady_clock::time_point started_;
  size_t drawn_lines_ = 0;
  bool stop_ = false;
  std::thread painter_;
};

}  // namespace lily::hub
