#include "server/responses_store.h"

#include "server/openai_response.h"

namespace aerie::server {

ResponseStore::ResponseStore(ResponseStoreLimits limits) : limits_(limits) {}

bool ResponseStore::put(const std::string& id, StoredResponse entry) {
  // The serialized size stands for the memory held: the DOM costs a small multiple of it, the same for
  // every entry, so the bound scales the same way.
  entry.bytes = int64_t(id.size() + dump_json(entry.response).size() + dump_json(entry.conversation).size());
  if (limits_.max_responses <= 0 || entry.bytes > limits_.max_bytes) {
    erase(id);  // an older entry under this id must not stay behind as if it were this one
    return false;
  }
  auto value = std::make_shared<const StoredResponse>(std::move(entry));
  std::lock_guard<std::mutex> lock(mutex_);
  if (auto it = entries_.find(id); it != entries_.end()) {
    bytes_ -= it->second.value->bytes;
    order_.erase(it->second.place);
    entries_.erase(it);
  }
  order_.push_front(id);
  bytes_ += value->bytes;
  entries_.emplace(id, Entry{std::move(value), order_.begin()});
  evict_to_fit();
  return true;
}

void ResponseStore::evict_to_fit() {
  while (!order_.empty() && (int64_t(entries_.size()) > limits_.max_responses || bytes_ > limits_.max_bytes)) {
    auto it = entries_.find(order_.back());
    bytes_ -= it->second.value->bytes;
    entries_.erase(it);
    order_.pop_back();
    ++evictions_;
  }
}

std::shared_ptr<const StoredResponse> ResponseStore::get(const std::string& id) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = entries_.find(id);
  if (it == entries_.end()) return nullptr;
  order_.splice(order_.begin(), order_, it->second.place);
  return it->second.value;
}

bool ResponseStore::erase(const std::string& id) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = entries_.find(id);
  if (it == entries_.end()) return false;
  bytes_ -= it->second.value->bytes;
  order_.erase(it->second.place);
  entries_.erase(it);
  return true;
}

int64_t ResponseStore::size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return int64_t(entries_.size());
}

int64_t ResponseStore::bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return bytes_;
}

int64_t ResponseStore::evictions() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return evictions_;
}

}  // namespace aerie::server
