#include "core/json_parse.h"

#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

namespace aerie {
namespace {

using Json = nlohmann::ordered_json;
using Object = Json::object_t;  // ordered_map: a std::vector of (key, value) pairs

// Objects up to this size find a repeated key by a linear search (cheaper than hashing); larger ones keep
// a set of their keys.
constexpr size_t kIndexFrom = 32;

// A SAX handler (nlohmann's interface, by name) that builds the DOM. Pointers to open containers stay
// valid: only the innermost open container grows.
class LinearDomBuilder {
 public:
  Json take() { return std::move(root_); }

  bool null() { return put(Json(nullptr)); }
  bool boolean(bool value) { return put(Json(value)); }
  bool number_integer(Json::number_integer_t value) { return put(Json(value)); }
  bool number_unsigned(Json::number_unsigned_t value) { return put(Json(value)); }
  bool number_float(Json::number_float_t value, const Json::string_t&) { return put(Json(value)); }
  bool string(Json::string_t& value) { return put(Json(std::move(value))); }
  bool binary(Json::binary_t& value) { return put(Json::binary(std::move(value))); }
  bool start_object(std::size_t) { return open(Json::object()); }
  bool start_array(std::size_t) { return open(Json::array()); }
  bool key(Json::string_t& key) {
    stack_.back().key = std::move(key);
    return true;
  }
  bool end_object() { return close(); }
  bool end_array() { return close(); }
  template <class Exception>
  bool parse_error(std::size_t, const std::string&, const Exception& error) {
    throw error;
  }

 private:
  struct Frame {
    Json* container;
    std::string key;                      // objects: the member being read
    std::unordered_set<std::string> keys;  // objects beyond kIndexFrom members: every key
  };

  bool put(Json value) {
    place(std::move(value));
    return true;
  }

  bool open(Json container) {
    Json* placed = place(std::move(container));
    stack_.push_back(Frame{placed, {}, {}});
    return true;
  }

  bool close() {
    stack_.pop_back();
    return true;
  }

  Json* place(Json value) {
    if (stack_.empty()) {
      root_ = std::move(value);
      return &root_;
    }
    Frame& top = stack_.back();
    if (top.container->is_array()) {
      top.container->get_ref<Json::array_t&>().push_back(std::move(value));
      return &top.container->back();
    }
    Object& object = top.container->get_ref<Object&>();
    if (Json* existing = find_repeated(top, object)) {
      *existing = std::move(value);
      return existing;
    }
    object.Object::Container::emplace_back(std::move(top.key), std::move(value));
    return &object.back().second;
  }

  // The member already named top.key, or null (and the key is then recorded).
  static Json* find_repeated(Frame& top, Object& object) {
    if (object.size() < kIndexFrom) {
      for (auto& member : object)
        if (member.first == top.key) return &member.second;
      return nullptr;
    }
    if (top.keys.empty())
      for (const auto& member : object) top.keys.insert(member.first);
    if (top.keys.insert(top.key).second) return nullptr;
    for (auto& member : object)
      if (member.first == top.key) return &member.second;
    return nullptr;
  }

  Json root_;
  std::vector<Frame> stack_;
};

}  // namespace

Json parse_ordered_json(std::string_view text) {
  LinearDomBuilder builder;
  Json::sax_parse(text, &builder);
  return builder.take();
}

}  // namespace aerie
