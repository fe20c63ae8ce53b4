#include "core/limits.h"

#include <charconv>
#include <functional>
#include <limits>
#include <vector>

#include "core/error.h"

namespace aerie {
namespace {

// One settable limit: its name and how to read and write it as a 64-bit integer (every field is a count,
// a size in bytes or a number of seconds).
struct LimitField {
  std::string name;
  int64_t max;
  std::function<int64_t(const RequestSideLimits&)> get;
  std::function<void(RequestSideLimits&, int64_t)> set;
};

template <typename Group, typename T>
LimitField field(std::string name, Group RequestSideLimits::*group, T Group::*member) {
  const int64_t max = std::numeric_limits<T>::max() > uint64_t(std::numeric_limits<int64_t>::max())
                          ? std::numeric_limits<int64_t>::max()
                          : int64_t(std::numeric_limits<T>::max());
  return {std::move(name), max, [=](const RequestSideLimits& l) { return int64_t(l.*group.*member); },
          [=](RequestSideLimits& l, int64_t v) { l.*group.*member = T(v); }};
}

const std::vector<LimitField>& fields() {
  using L = RequestSideLimits;
  static const std::vector<LimitField> table = {
      field("http.max_body_bytes", &L::http, &HttpLimits::max_body_bytes),
      field("http.max_header_bytes", &L::http, &HttpLimits::max_header_bytes),
      field("http.header_deadline_s", &L::http, &HttpLimits::header_deadline_s),
      field("http.body_deadline_s", &L::http, &HttpLimits::body_deadline_s),
      field("http.keep_alive_idle_s", &L::http, &HttpLimits::keep_alive_idle_s),
      field("json.max_depth", &L::json, &JsonLimits::max_depth),
      field("json.max_keys_per_object", &L::json, &JsonLimits::max_keys_per_object),
      field("json.max_string_bytes", &L::json, &JsonLimits::max_string_bytes),
      field("request.max_choices", &L::request, &RequestLimits::max_choices),
      field("request.max_stop_sequences", &L::request, &RequestLimits::max_stop_sequences),
      field("request.max_stop_bytes", &L::request, &RequestLimits::max_stop_bytes),
      field("request.max_tools", &L::request, &RequestLimits::max_tools),
      field("request.max_logit_bias", &L::request, &RequestLimits::max_logit_bias),
      field("schema.max_depth", &L::schema, &SchemaLimits::max_depth),
      field("schema.max_nodes", &L::schema, &SchemaLimits::max_nodes),
      field("schema.max_table_entries", &L::schema, &SchemaLimits::max_table_entries),
      field("chat_template.max_output_bytes", &L::chat_template, &TemplateLimits::max_output_bytes),
      field("chat_template.max_value_bytes", &L::chat_template, &TemplateLimits::max_value_bytes),
      field("chat_template.max_loop_iterations", &L::chat_template, &TemplateLimits::max_loop_iterations),
      field("chat_template.max_call_depth", &L::chat_template, &TemplateLimits::max_call_depth),
      field("chat_template.max_parse_depth", &L::chat_template, &TemplateLimits::max_parse_depth),
      field("chat_template.max_work_bytes", &L::chat_template, &TemplateLimits::max_work_bytes),
  };
  return table;
}

std::string names() {
  std::string out;
  for (const LimitField& f : fields()) out += (out.empty() ? "" : ", ") + f.name;
  return out;
}

}  // namespace

void set_limit(RequestSideLimits& limits, std::string_view assignment) {
  const size_t eq = assignment.find('=');
  AERIE_CHECK(eq != std::string_view::npos, "limit '", assignment, "': expected NAME=VALUE (e.g. json.max_depth=256)");
  const std::string_view name = assignment.substr(0, eq), text = assignment.substr(eq + 1);
  for (const LimitField& f : fields()) {
    if (f.name != name) continue;
    int64_t value = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    AERIE_CHECK(ec == std::errc() && end == text.data() + text.size() && value >= 1 && value <= f.max, "limit ",
                name, " must be an integer in [1, ", f.max, "], got '", text, "'");
    f.set(limits, value);
    return;
  }
  throw Error(str_cat("unknown limit '", name, "'; the limits are: ", names()));
}

std::string describe_limits(const RequestSideLimits& limits) {
  std::string out;
  for (const LimitField& f : fields()) out += f.name + " = " + std::to_string(f.get(limits)) + "\n";
  return out;
}

}  // namespace aerie
