// What the chat-template tests share: the folder of tests/data/chat_template, the fixed clock the
// reference renderings used, and reading a file whole.
#pragma once

#include <ctime>
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

namespace aerie {

inline const std::string kDataDir = std::string(AERIE_TEST_DATA_DIR) + "/chat_template/";
inline constexpr std::time_t kFixedNow = 1721952000;  // 2024-07-26 00:00 UTC, as in render_reference.py

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << path;
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

}  // namespace aerie
