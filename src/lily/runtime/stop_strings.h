// Stops generation at user stop strings, matched across token boundaries:
// text that could still be the start of a stop string is held back until
// the next piece decides it.
#pragma once

#include <string>
#include <vector>

namespace lily {

class StopStrings {
 public:
  explicit StopStrings(std::vector<std::string> stops);

  // Adds decoded text; returns what may be shown now. After a match,
  // stopped() is true and nothing past the stop string is returned.
  std::string push(const std::string& text);
  // The held-back text at the end of generation.
  std::string finish();
  bool stopped() const { return stopped_; }
  // The stop string that matched (the earliest in the text), once stopped.
  const std::string& matched() const { return matched_; }

 private:
  std::vector<std::string> stops_;
  std::string held_, matched_;
  bool stopped_ = false;
};

}  // namespace lily
