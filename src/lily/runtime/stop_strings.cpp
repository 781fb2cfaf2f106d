#include "lily/runtime/stop_strings.h"

#include <algorithm>

namespace lily {

StopStrings::StopStrings(std::vector<std::string> stops) : stops_(std::move(stops)) {
  stops_.erase(std::remove(stops_.begin(), stops_.end(), std::string()), stops_.end());
}

std::string StopStrings::push(const std::string& text) {
  if (stopped_) return "";
  held_ += text;
  size_t first = std::string::npos;
  for (const auto& s : stops_)
    if (const size_t at = held_.find(s); at < first) {
      first = at;
      matched_ = s;
    }
  if (first != std::string::npos) {
    stopped_ = true;
    std::string out = held_.substr(0, first);
    held_.clear();
    return out;
  }
  // hold the longest suffix that is a prefix of some stop string
  size_t hold = 0;
  for (const auto& s : stops_)
    for (size_t n = std::min(held_.size(), s.size() - 1); n > hold; --n)
      if (held_.compare(held_.size() - n, n, s, 0, n) == 0) {
        hold = n;
        break;
      }
  std::string out = held_.substr(0, held_.size() - hold);
  held_.erase(0, held_.size() - hold);
  return out;
}

std::string StopStrings::finish() {
  std::string out = stopped_ ? "" : held_;
  held_.clear();
  return out;
}

}  // namespace lily
