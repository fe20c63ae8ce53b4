#include "dist/fault.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>
#include <thread>

namespace aerie::dist {

void maybe_inject_fault(int rank, std::string_view op) {
  const char* spec = std::getenv("AERIE_DIST_FAULT");
  if (spec == nullptr) return;
  // RANK:OP[:exit|:hang[:N]]
  std::vector<std::string> fields;
  for (std::string text = spec;;) {
    const size_t colon = text.find(':');
    fields.push_back(text.substr(0, colon));
    if (colon == std::string::npos) break;
    text = text.substr(colon + 1);
  }
  if (fields.size() < 2 || std::atoi(fields[0].c_str()) != rank || fields[1] != op) return;
  const bool hang = fields.size() > 2 && fields[2] == "hang";
  const long nth = fields.size() > 3 ? std::max(1L, std::atol(fields[3].c_str())) : 1;
  static long calls = 0;  // of the faulty op on this rank
  if (++calls != nth) return;
  std::fprintf(stderr, "aerie dist: rank %d: AERIE_DIST_FAULT: %s in %.*s (call %ld)\n", rank,
               hang ? "hanging" : "exiting", int(op.size()), op.data(), nth);
  std::fflush(stderr);
  if (!hang) _exit(3);
  for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
}

double timeout_from_environment(double fallback) {
  const char* value = std::getenv("AERIE_DIST_TIMEOUT_S");
  if (value == nullptr) return fallback;
  const double seconds = std::atof(value);
  return seconds > 0 ? seconds : fallback;
}

}  // namespace aerie::dist
