#include <charconv>

#include "lily/cli/commands.h"
#include "lily/error.h"

namespace lily::cli {

std::vector<int32_t> parse_token_list(const std::string& text) {
  std::vector<int32_t> ids;
  size_t i = 0;
  while (i <= text.size()) {
    size_t j = text.find(',', i);
    if (j == std::string::npos) j = text.size();
    std::string item = text.substr(i, j - i);
    while (!item.empty() && item.front() == ' ') item.erase(item.begin());
    while (!item.empty() && item.back() == ' ') item.pop_back();
    int64_t v = 0;
    auto [p, ec] = std::from_chars(item.data(), item.data() + item.size(), v);
    if (item.empty() || ec != std::errc() || p != item.data() + item.size() || v < 0 || v > INT32_MAX)
      throw Error("--tokens: '" + item + "' is not a token id (expected a comma-separated list like 1,2,3)");
    ids.push_back(static_cast<int32_t>(v));
    i = j + 1;
  }
  return ids;
}

}  // namespace lily::cli
