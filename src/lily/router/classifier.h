// Classifies a request into data categories, each with the findings that put
// it there: from the tools it declares, the tool calls and tool results in
// its history, detectors over every string in the body (and over the text
// joined across messages), attached files, and what the client asked for
// itself. It also remembers what local-category tool results said, so a
// later request that quotes one (without the tool result in its history) is
// classified the same way.
#pragma once

#include <cstdint>
#include <deque>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "lily/router/deployment_config.h"
#include "lily/router/detectors.h"

namespace lily::router {

struct Classification {
  std::set<std::string> categories;
  std::vector<Finding> findings;
  bool client_asked_local = false;  // the request's own field or header made routing stricter
  void add(Finding f);
};

// Passages of earlier local-category data, as hashes of overlapping windows
// of their normalized text; bounded, oldest forgotten first.
class QuoteMemory {
 public:
  explicit QuoteMemory(size_t max_windows = size_t(1) << 22) : max_(max_windows) {}
  void remember(const std::string& text, const std::string& category);
  // The category of an earlier passage that `text` quotes (48 characters or more), or "".
  std::string quoted_in(const std::string& text) const;

 private:
  size_t max_;
  mutable std::mutex mu_;
  std::unordered_map<uint64_t, std::string> windows_;
  std::deque<uint64_t> order_;
};

class Classifier {
 public:
  Classifier(const DeploymentConfig& config, QuoteMemory& memory) : config_(config), memory_(memory) {}

  // A Chat Completions (or similar) request body. `route_header` is the
  // request's x-lily-route header, if any. Throws ApiError-free lily::Error
  // only for a malformed routing field the client sent.
  Classification classify(const nlohmann::ordered_json& body, const std::string& route_header) const;

 private:
  const DeploymentConfig& config_;
  QuoteMemory& memory_;
};

}  // namespace lily::router
