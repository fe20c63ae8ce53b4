// The stored responses of POST /v1/responses (`store`, default true): what GET and DELETE
// /v1/responses/{id} answer and what `previous_response_id` continues from. Held in memory only (a restart
// forgets them), bounded both by count and by bytes (the JSON text of the response and its conversation);
// a put beyond either limit evicts the least recently used entries (a get or put counts as a use). An entry
// larger than the whole byte limit is not stored at all. Thread-safe; entries are immutable and shared, so a
// reader keeps its copy alive even when the store evicts it meanwhile.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include <nlohmann/json.hpp>

namespace aerie::server {

struct ResponseStoreLimits {
  int64_t max_responses = 1024;  // 0: nothing is stored (previous_response_id never resolves)
  int64_t max_bytes = int64_t{256} << 20;
};

struct StoredResponse {
  nlohmann::ordered_json response;  // the response object, as GET /v1/responses/{id} returns it
  // Every item the model saw except the instructions (the inherited conversation first, then this
  // request's input items) followed by the response's output items: a later request naming this response
  // as previous_response_id starts from these. OpenAI does not carry instructions over either.
  nlohmann::ordered_json conversation = nlohmann::ordered_json::array();
  int64_t bytes = 0;  // set by ResponseStore::put
};

class ResponseStore {
 public:
  explicit ResponseStore(ResponseStoreLimits limits = {});
  ResponseStore(const ResponseStore&) = delete;
  ResponseStore& operator=(const ResponseStore&) = delete;

  // Stores `entry` under `id` (replacing an older one), then evicts least recently used entries until both
  // limits hold. Returns false when the entry alone is larger than max_bytes or storing is off.
  bool put(const std::string& id, StoredResponse entry);
  // The entry, or null when it was never stored, was evicted or was deleted.
  std::shared_ptr<const StoredResponse> get(const std::string& id);
  // Whether an entry was removed.
  bool erase(const std::string& id);

  int64_t size() const;
  int64_t bytes() const;
  int64_t evictions() const;
  const ResponseStoreLimits& limits() const { return limits_; }

 private:
  using Order = std::list<std::string>;  // most recently used first
  struct Entry {
    std::shared_ptr<const StoredResponse> value;
    Order::iterator place;
  };
  void evict_to_fit();

  const ResponseStoreLimits limits_;
  mutable std::mutex mutex_;
  Order order_;
  std::unordered_map<std::string, Entry> entries_;
  int64_t bytes_ = 0;
  int64_t evictions_ = 0;
};

}  // namespace aerie::server
