// A fresh folder under the system temp directory for one test, removed with everything in it afterwards.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <random>
#include <string>

namespace aerie::testing {

struct TmpDir {
  std::filesystem::path path = std::filesystem::temp_directory_path() /
                               ("aerie_io_" + std::to_string(::getpid()) + "_" + std::to_string(std::random_device{}()));
  TmpDir() { std::filesystem::create_directories(path); }
  ~TmpDir() { std::filesystem::remove_all(path); }
  TmpDir(const TmpDir&) = delete;
  TmpDir& operator=(const TmpDir&) = delete;
};

}  // namespace aerie::testing
