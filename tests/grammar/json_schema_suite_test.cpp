// The official JSON-Schema-Test-Suite (tests/data/json_schema_suite, copied by
// tools/gen/structured/extract_json_schema_suite.py) as the judge of structured output. For every schema:
// - compile_json_schema refuses it with an aerie::Error naming a JSON pointer (the refused keyword is
//   counted in the summary; a schema refused as admitting no value must have no valid instance), or
// - every "valid" instance is producible: some text of it (json_serialisations.h: compact, members in the
//   order the grammar emits them, numbers also in plain decimal) takes the matcher to an accepting state,
//   and with the real Llama 3.1 and DeepSeek-V3 tokenizers every token of that text's tokenisation is
//   allowed by the JsonConstraint's mask at its step, and then an end token; and
// - every "invalid" instance is unproducible: no text of it in any member order is accepted. An invalid
//   instance accepted is always a failure.
// Both hold for the grammar compiled with whitespace allowed (JsonWhitespace::kAny) as well: it changes
// layout, never which values are producible.
// Valid instances the grammar's documented narrowings leave out (json_schema.h) are listed, one line and
// a reason each, in json_schema_suite_expectations.txt; a listed case that is now producible, or whose
// schema is now refused, fails the test so that the list only shrinks.
//
// optional/format/*.json assert formats, which the compiler ignores as annotations: a format file is judged
// like the others once the grammar refuses at least one of its invalid instances (the format is then
// enforced); until then its accepted invalid instances are only counted ("format not enforced").
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "grammar/json_constraint.h"
#include "grammar/json_schema.h"
#include "json_serialisations.h"
#include "real_vocabulary.h"

namespace aerie {
namespace {

using Json = nlohmann::ordered_json;
namespace fs = std::filesystem;

const fs::path kSuiteDir = fs::path(AERIE_TEST_DATA_DIR) / "json_schema_suite";
const fs::path kExpectationsPath = fs::path(AERIE_SOURCE_DIR) / "tests/grammar/json_schema_suite_expectations.txt";

// "file :: group :: test", the key of a case (descriptions are unique within their group in the suite).
std::string case_key(const std::string& file, const std::string& group, const std::string& test) {
  return file + " :: " + group + " :: " + test;
}

// Key -> reason, from lines "file :: group description :: test description :: reason" ('#' comments).
std::map<std::string, std::string> read_expectations() {
  std::map<std::string, std::string> out;
  std::ifstream in(kExpectationsPath);
  EXPECT_TRUE(in) << "cannot open " << kExpectationsPath;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    const size_t last = line.rfind(" :: ");
    EXPECT_NE(last, std::string::npos) << "expectations: no reason in: " << line;
    if (last == std::string::npos) continue;
    EXPECT_TRUE(out.emplace(line.substr(0, last), line.substr(last + 4)).second) << "listed twice: " << line;
  }
  return out;
}

// The keyword a refusal names: the first quoted word of the message (`unsupported keyword "pattern" at #`,
// `"$ref" together with "type" at #/...`), or a class of error for messages without one.
std::string refused_keyword(const std::string& message) {
  if (message.find("only local references") != std::string::npos) return "$ref (not local)";
  if (message.find("does not resolve") != std::string::npos) return "$ref (does not resolve)";
  if (message.find("admits no value") != std::string::npos) return "(admits no value)";
  const size_t open = message.find('"');
  const size_t close = open == std::string::npos ? open : message.find('"', open + 1);
  if (close != std::string::npos) return message.substr(open + 1, close - open - 1);
  return "(other: " + message.substr(0, 60) + ")";
}

struct Summary {
  int schemas = 0, compiled = 0;
  std::map<std::string, int> refused;  // keyword -> schemas
  int valid_checked = 0, valid_produced = 0, valid_expected_unproducible = 0;
  int invalid_checked = 0, invalid_refused = 0, invalid_unjudged = 0;
  size_t tokens_checked = 0;
  std::vector<std::string> formats_not_enforced;

  void print(const std::string& name) const {
    std::printf("[suite %s] %d schemas: %d compiled, %d refused\n", name.c_str(), schemas, compiled,
                schemas - compiled);
    std::vector<std::pair<int, std::string>> by_count;
    for (const auto& [keyword, n] : refused) by_count.emplace_back(-n, keyword);
    std::sort(by_count.begin(), by_count.end());
    std::string line;
    for (const auto& [n, keyword] : by_count) line += " " + keyword + "=" + std::to_string(-n);
    if (!line.empty()) std::printf("[suite %s] refused by keyword:%s\n", name.c_str(), line.c_str());
    std::printf("[suite %s] valid instances: %d checked, %d produced (%zu tokens masked in), %d listed unproducible\n",
                name.c_str(), valid_checked, valid_produced, tokens_checked, valid_expected_unproducible);
    std::printf("[suite %s] invalid instances: %d checked, %d refused, %d accepted under a format not enforced\n",
                name.c_str(), invalid_checked, invalid_refused, invalid_unjudged);
    if (!formats_not_enforced.empty()) {
      line.clear();
      for (const std::string& f : formats_not_enforced) line += " " + f;
      std::printf("[suite %s] formats not enforced:%s\n", name.c_str(), line.c_str());
    }
  }
};

class JsonSchemaSuite : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    for (const char* model : {"llama3_1", "deepseek_v3"}) {
      vocabularies_.push_back(test::real_vocabulary(model));
      ASSERT_NE(vocabularies_.back(), nullptr)
          << "missing " << test::real_tokenizer_dir(model) << ": run tools/gen/tokenizer/fetch_tokenizers.sh";
    }
  }

  // The case files of this parameter's directory (not its subdirectories), by name.
  std::vector<fs::path> files() const {
    std::vector<fs::path> out;
    for (const auto& entry : fs::directory_iterator(kSuiteDir / GetParam()))
      if (entry.is_regular_file() && entry.path().extension() == ".json") out.push_back(entry.path());
    std::sort(out.begin(), out.end());
    return out;
  }

  // The tokenisation of `text` is allowed token by token, then an end token; else a failure naming the step.
  void check_tokens(const std::shared_ptr<const JsonGrammar>& grammar, const std::string& text,
                    const std::string& key) {
    for (const test::RealVocabulary* vocabulary : vocabularies_) check_tokens(*vocabulary, grammar, text, key);
  }
  void check_tokens(const test::RealVocabulary& vocabulary, const std::shared_ptr<const JsonGrammar>& grammar,
                    const std::string& text, const std::string& key) {
    JsonConstraint constraint(grammar, vocabulary.trie);
    const std::vector<int32_t> ids = vocabulary.tokenizer->encode(text, /*add_special_tokens=*/false);
    std::string prefix;
    for (const int32_t id : ids) {
      constraint.allowed_tokens(mask_);
      ++summary_.tokens_checked;
      const std::string_view bytes = vocabulary.trie->token_bytes(id);
      if (!mask_[size_t(id)] || !constraint.accept(id)) {
        ADD_FAILURE() << key << ": token " << id << " '" << bytes << "' masked out after '" << prefix
                      << "' in the valid text " << text;
        return;
      }
      prefix += bytes;
    }
    constraint.allowed_tokens(mask_);
    EXPECT_TRUE(mask_[size_t(vocabulary.end_tokens[0])]) << key << ": no end token after the valid text " << text;
  }

  std::vector<const test::RealVocabulary*> vocabularies_;  // Llama 3.1, DeepSeek-V3
  std::vector<uint8_t> mask_;
  Summary summary_;
};

TEST_P(JsonSchemaSuite, ValidProducibleInvalidNot) {
  std::map<std::string, std::string> expectations = read_expectations();
  const bool format_files = GetParam().find("format") != std::string::npos;
  test::SerialisationSearch search;
  for (const fs::path& path : files()) {
    const std::string file = fs::relative(path, kSuiteDir).generic_string();
    std::ifstream in(path);
    const Json groups = Json::parse(in);
    // A format file is judged once its format is enforced (some invalid instance refused); its failures
    // wait in `pending` until the whole file has been seen.
    std::vector<std::string> pending;
    bool enforced = !format_files;
    for (const Json& group : groups) {
      const std::string group_name = group.at("description");
      ++summary_.schemas;
      std::shared_ptr<const JsonGrammar> grammar, spaced;  // compact; RFC 8259 whitespace allowed
      std::string refusal;
      try {
        grammar = compile_json_schema(group.at("schema"));
        ++summary_.compiled;
        spaced = compile_json_schema(group.at("schema"), {}, JsonWhitespace::kAny);
      } catch (const Error& e) {
        refusal = e.what();
        ++summary_.refused[refused_keyword(refusal)];
        EXPECT_NE(refusal.find('#'), std::string::npos)
            << file << " :: " << group_name << ": the refusal names no JSON pointer: " << refusal;
        // "Admits no value" is a claim about the schema, which a valid instance disproves.
        if (refusal.find("admits no value") != std::string::npos) {
          for (const Json& test : group.at("tests")) {
            EXPECT_FALSE(test.at("valid").get<bool>()) << file << " :: " << group_name << ": refused as admitting no "
                                                       << "value, but " << test.at("data").dump() << " is valid";
          }
        }
      }
      for (const Json& test : group.at("tests")) {
        const std::string key = case_key(file, group_name, test.at("description"));
        const auto expected = expectations.find(key);
        const bool listed = expected != expectations.end();
        const std::string reason = listed ? expected->second : std::string();  // kept: the entry is erased
        if (listed) expectations.erase(expected);
        const Json& data = test.at("data");
        const bool valid = test.at("valid");
        if (!grammar) {
          EXPECT_FALSE(listed) << key << ": listed, but its schema is refused (" << refusal << "): drop the line";
          continue;
        }
        const std::optional<std::string> text = search.find(*grammar, data);
        EXPECT_FALSE(search.exhausted()) << key << ": the search over member orders ran out of budget";
        // The whitespace mode changes layout only: the same values are producible without it.
        ASSERT_NE(spaced, nullptr) << key << ": compiles compact but not with whitespace";
        EXPECT_EQ(search.find(*spaced, data).has_value(), text.has_value())
            << key << ": producible " << text.has_value() << " compact but not with whitespace allowed";
        if (!valid) {
          EXPECT_FALSE(listed) << key << ": an invalid instance cannot be listed";
          ++summary_.invalid_checked;
          if (!text) ++summary_.invalid_refused, enforced = true;
          else pending.push_back(key + ": the invalid instance " + data.dump() + " is accepted as " + *text);
          continue;
        }
        ++summary_.valid_checked;
        if (!text) {
          if (listed) ++summary_.valid_expected_unproducible;
          else ADD_FAILURE() << key << ": the valid instance " << data.dump() << " is unproducible";
          continue;
        }
        EXPECT_FALSE(listed) << key << ": listed (" << reason << ") but now producible as " << *text
                             << ": drop the line";
        ++summary_.valid_produced;
        check_tokens(grammar, *text, key);
      }
    }
    if (enforced) {
      for (const std::string& failure : pending) ADD_FAILURE() << failure;
    } else {
      summary_.formats_not_enforced.push_back(path.stem().string());
      summary_.invalid_unjudged += int(pending.size());
    }
  }
  // Lines left over name cases of this directory that do not exist (a typo, or the suite changed).
  const std::string prefix = GetParam() + "/";
  for (const auto& [key, reason] : expectations) {
    const std::string file = key.substr(0, key.find(" :: "));
    const bool here = file.rfind(prefix, 0) == 0 && file.find('/', prefix.size()) == std::string::npos;
    EXPECT_FALSE(here) << "expectations: no such case: " << key;
  }
  summary_.print(GetParam());
}

INSTANTIATE_TEST_SUITE_P(Drafts, JsonSchemaSuite,
                         ::testing::Values("draft2020-12", "draft2020-12/optional", "draft2020-12/optional/format",
                                           "draft7", "draft4"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string name = info.param;
                           for (char& c : name)
                             if (!std::isalnum(uint8_t(c))) c = '_';
                           return name;
                         });

}  // namespace
}  // namespace aerie
