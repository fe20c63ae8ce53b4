#include "tokenizer/pre_tokenizer.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace aerie {
namespace {

using Json = nlohmann::json;

// Bytes in the UTF-8 character at text[pos] (1 at the end, so that a search loop always advances).
size_t utf8_step(std::string_view text, size_t pos) {
  if (pos >= text.size()) return 1;
  const auto lead = static_cast<uint8_t>(text[pos]);
  return lead < 0xC0 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
}

// The GPT-2 pattern that a ByteLevel pre-tokenizer with use_regex applies.
constexpr std::string_view kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

const Json& field(const Json& object, const char* key, std::string_view component) {
  AERIE_CHECK(object.contains(key), "tokenizer.json: pre_tokenizer ", component, " lacks field '", key, "'");
  return object.at(key);
}

bool bool_field(const Json& object, const char* key, bool fallback, std::string_view component) {
  if (!object.contains(key) || object.at(key).is_null()) return fallback;
  AERIE_CHECK(object.at(key).is_boolean(), "tokenizer.json: pre_tokenizer ", component, " field '", key,
              "' must be a boolean");
  return object.at(key).get<bool>();
}

SplitBehavior parse_behavior(const Json& value) {
  AERIE_CHECK(value.is_string(), "tokenizer.json: Split behavior must be a string");
  const auto name = value.get<std::string>();
  if (name == "Removed") return SplitBehavior::kRemoved;
  if (name == "Isolated") return SplitBehavior::kIsolated;
  if (name == "MergedWithPrevious") return SplitBehavior::kMergedWithPrevious;
  if (name == "MergedWithNext") return SplitBehavior::kMergedWithNext;
  if (name == "Contiguous") return SplitBehavior::kContiguous;
  throw_error(str_cat("tokenizer.json: unknown Split behavior '", name,
                      "' (expected Removed, Isolated, MergedWithPrevious, MergedWithNext or Contiguous)"));
}

PreTokenizer::SplitStep regex_step(std::string_view pattern, SplitBehavior behavior) {
  PreTokenizer::SplitStep step;
  step.regex = std::make_unique<Regex>(pattern);
  step.behavior = behavior;
  return step;
}

PreTokenizer::SplitStep parse_split(const Json& config) {
  const Json& pattern = field(config, "pattern", "Split");
  PreTokenizer::SplitStep step;
  if (pattern.is_object() && pattern.contains("Regex") && pattern.at("Regex").is_string()) {
    step.regex = std::make_unique<Regex>(pattern.at("Regex").get<std::string>());
  } else if (pattern.is_object() && pattern.contains("String") && pattern.at("String").is_string()) {
    step.literal = pattern.at("String").get<std::string>();
  } else {
    throw_error("tokenizer.json: Split pattern must be {\"Regex\": string} or {\"String\": string}");
  }
  step.behavior = parse_behavior(field(config, "behavior", "Split"));
  step.invert = bool_field(config, "invert", false, "Split");
  return step;
}

// " " + piece, stored in the scratch arena.
std::string_view with_prefix_space(std::string_view piece, PreTokenizer::Scratch& scratch) {
  std::string& text = scratch.arena.emplace_back();
  text.reserve(piece.size() + 1);
  text.push_back(' ');
  text.append(piece);
  return text;
}

}  // namespace

void PreTokenizer::SplitStep::apply(std::string_view piece, Scratch& scratch,
                                    std::vector<std::string_view>& out) const {
  // 1. Cover the piece with alternating runs: (offsets, is_match).
  auto& matches = scratch.matches;
  matches.clear();
  size_t previous_end = 0;
  auto add_match = [&](size_t begin, size_t end) {
    if (begin != previous_end) matches.push_back({previous_end, begin, invert});
    matches.push_back({begin, end, !invert});
    previous_end = end;
  };
  if (regex) {
    size_t start = 0, begin = 0, end = 0;
    while (start <= piece.size() && scratch.matcher.find(*regex, piece, start, &begin, &end)) {
      add_match(begin, end);
      // After an empty match, resume one character later (as Oniguruma's search loop does).
      start = end > begin ? end : end + utf8_step(piece, end);
    }
  } else if (!literal.empty()) {
    for (size_t at = piece.find(literal); at != std::string_view::npos; at = piece.find(literal, previous_end)) {
      add_match(at, at + literal.size());
    }
  }
  if (previous_end != piece.size()) matches.push_back({previous_end, piece.size(), invert});

  // 2. Merge runs by behaviour; a run marked `remove` is dropped, and so is every empty run.
  using Run = Scratch::Run;
  auto& runs = scratch.runs;
  runs.clear();
  switch (behavior) {
    case SplitBehavior::kRemoved:
      for (const auto& m : matches) runs.push_back({m.begin, m.end, m.is_match});
      break;
    case SplitBehavior::kIsolated:
      for (const auto& m : matches) runs.push_back({m.begin, m.end, false});
      break;
    case SplitBehavior::kContiguous: {
      bool previous_match = false;
      for (const auto& m : matches) {
        if (m.is_match == previous_match && !runs.empty()) runs.back().end = m.end;
        else runs.push_back({m.begin, m.end, false});
        previous_match = m.is_match;
      }
      break;
    }
    case SplitBehavior::kMergedWithPrevious: {
      bool previous_match = false;
      for (const auto& m : matches) {
        if (m.is_match && !previous_match && !runs.empty()) runs.back().end = m.end;
        else runs.push_back({m.begin, m.end, false});
        previous_match = m.is_match;
      }
      break;
    }
    case SplitBehavior::kMergedWithNext: {
      // Same as MergedWithPrevious, walking from the end.
      bool previous_match = false;
      for (auto it = matches.rbegin(); it != matches.rend(); ++it) {
        if (it->is_match && !previous_match && !runs.empty()) runs.back().begin = it->begin;
        else runs.push_back({it->begin, it->end, false});
        previous_match = it->is_match;
      }
      std::reverse(runs.begin(), runs.end());
      break;
    }
  }
  for (const Run& run : runs) {
    if (!run.remove && run.end > run.begin) out.push_back(piece.substr(run.begin, run.end - run.begin));
  }
}

PreTokenizer::PreTokenizer() = default;
PreTokenizer::~PreTokenizer() = default;
PreTokenizer::PreTokenizer(PreTokenizer&&) noexcept = default;
PreTokenizer& PreTokenizer::operator=(PreTokenizer&&) noexcept = default;

PreTokenizer PreTokenizer::from_json(const Json& config) {
  PreTokenizer result;
  if (config.is_null()) return result;
  std::vector<const Json*> components;
  AERIE_CHECK(config.is_object() && config.contains("type") && config.at("type").is_string(),
              "tokenizer.json: pre_tokenizer must be null or an object with a string 'type'");
  if (config.at("type") == "Sequence") {
    const Json& list = field(config, "pretokenizers", "Sequence");
    AERIE_CHECK(list.is_array(), "tokenizer.json: pre_tokenizer Sequence 'pretokenizers' must be an array");
    for (const Json& item : list) components.push_back(&item);
  } else {
    components.push_back(&config);
  }
  for (const Json* item : components) {
    AERIE_CHECK(item->is_object() && item->contains("type") && item->at("type").is_string(),
                "tokenizer.json: each pre_tokenizer must be an object with a string 'type'");
    const auto type = item->at("type").get<std::string>();
    AERIE_CHECK(!result.byte_level_, "tokenizer.json: pre_tokenizer ", type,
                " after ByteLevel is not supported (ByteLevel must be the last pre-tokenizer)");
    if (type == "Split") {
      result.steps_.push_back(parse_split(*item));
    } else if (type == "Digits") {
      const bool individual = bool_field(*item, "individual_digits", false, "Digits");
      // Rust's char::is_numeric is the Unicode N category; runs of them, or each one alone.
      result.steps_.push_back(regex_step(individual ? R"(\p{N})" : R"(\p{N}+)", SplitBehavior::kIsolated));
    } else if (type == "ByteLevel") {
      result.byte_level_ = true;
      result.byte_level_prefix_space_ = bool_field(*item, "add_prefix_space", true, "ByteLevel");
      result.byte_level_regex_ = bool_field(*item, "use_regex", true, "ByteLevel");
      if (result.byte_level_regex_) {
        result.steps_.push_back(regex_step(kGpt2Pattern, SplitBehavior::kIsolated));
      }
    } else if (type == "Sequence") {
      throw_error("tokenizer.json: nested pre_tokenizer Sequence is not supported");
    } else {
      throw_error(str_cat("tokenizer.json: unsupported pre_tokenizer type '", type,
                          "' (supported: Sequence, Split, Digits, ByteLevel)"));
    }
  }
  return result;
}

void PreTokenizer::split(std::string_view text, Scratch& scratch, std::vector<std::string_view>& pieces) const {
  if (text.empty()) return;
  scratch.matcher.start_budget(text.size(), steps_.size());
  const size_t first = pieces.size();
  pieces.push_back(text);
  const size_t n_steps = steps_.size();
  for (size_t s = 0; s < n_steps; ++s) {
    // ByteLevel's prefix space goes in front of every piece, before its own regex (the last step).
    const bool byte_level_step = byte_level_regex_ && s + 1 == n_steps;
    scratch.swap.assign(pieces.begin() + static_cast<std::ptrdiff_t>(first), pieces.end());
    pieces.resize(first);
    for (std::string_view piece : scratch.swap) {
      if (byte_level_step && byte_level_prefix_space_ && piece.front() != ' ') {
        piece = with_prefix_space(piece, scratch);
      }
      steps_[s].apply(piece, scratch, pieces);
    }
  }
  // ByteLevel without use_regex: only the prefix space.
  if (byte_level_ && byte_level_prefix_space_ && !byte_level_regex_) {
    for (size_t i = first; i < pieces.size(); ++i) {
      if (pieces[i].front() != ' ') pieces[i] = with_prefix_space(pieces[i], scratch);
    }
  }
}

}  // namespace aerie
