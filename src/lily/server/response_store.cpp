#include "lily/server/response_store.h"

namespace lily::server {

void ResponseStore::put(const std::string& id, StoredResponse r) {
  if (max_entries_ == 0) return;
  const size_t bytes = r.conversation.dump().size() + r.response.dump().size() + id.size();
  if (bytes > max_bytes_) return;  // larger than the whole store: not kept
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = entries_.find(id); it != entries_.end()) {
    bytes_ -= it->second.bytes;
    lru_.erase(it->second.age);
    entries_.erase(it);
  }
  while (!lru_.empty() && (entries_.size() >= max_entries_ || bytes_ + bytes > max_bytes_)) {
    auto old = entries_.find(lru_.back());
    bytes_ -= old->second.bytes;
    entries_.erase(old);
    lru_.pop_back();
  }
  lru_.push_front(id);
  entries_.emplace(id, Entry{std::move(r), bytes, lru_.begin()});
  bytes_ += bytes;
}

std::optional<StoredResponse> ResponseStore::get(const std::string& id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(id);
  if (it == entries_.end()) return std::nullopt;
  lru_.splice(lru_.begin(), lru_, it->second.age);
  return it->second.value;
}

bool ResponseStore::erase(const std::string& id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(id);
  if (it == entries_.end()) return false;
  bytes_ -= it->second.bytes;
  lru_.erase(it->second.age);
  entries_.erase(it);
  return true;
}

size_t ResponseStore::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return entries_.size();
}

}  // namespace lily::server
