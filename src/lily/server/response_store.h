// The finished responses of the Responses API kept for follow-ups: a client
// sends previous_response_id and only its new items, and the server puts the
// stored conversation in front of them (the prefix cache then resumes the
// shared part). Bounded in count and bytes, the least recently used going
// first; a response asked not to be stored (store: false) is never kept.
#pragma once

#include <cstddef>
#include <list>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <unordered_map>

namespace lily::server {

struct StoredResponse {
  nlohmann::ordered_json conversation;  // the messages so far, the answer included (Chat Completions form)
  nlohmann::ordered_json response;      // the response object as it was returned
};

class ResponseStore {
 public:
  ResponseStore(size_t max_entries, size_t max_bytes) : max_entries_(max_entries), max_bytes_(max_bytes) {}

  void put(const std::string& id, StoredResponse r);
  std::optional<StoredResponse> get(const std::string& id);
  bool erase(const std::string& id);
  size_t size() const;

 private:
  struct Entry {
    StoredResponse value;
    size_t bytes;
    std::list<std::string>::iterator age;
  };
  size_t max_entries_, max_bytes_, bytes_ = 0;
  mutable std::mutex mu_;
  std::unordered_map<std::string, Entry> entries_;
  std::list<std::string> lru_;  // most recently used first
};

}  // namespace lily::server
