#include "dist/fault.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

namespace aerie::dist {

void maybe_inject_fault(int rank, std::string_view op) {
  const char* spec = std::getenv("AERIE_DIST_FAULT");
  if (spec == nullptr) return;
  // RANK:OP[:hang]
  const std::string text = spec;
  const size_t colon = text.find(':');
  if (colon == std::string::npos) return;
  if (std::atoi(text.substr(0, colon).c_str()) != rank) return;
  const std::string rest = text.substr(colon + 1);
  const size_t colon2 = rest.find(':');
  const std::string fault_op = rest.substr(0, colon2);
  const bool hang = colon2 != std::string::npos && rest.substr(colon2 + 1) == "hang";
  if (fault_op != op) return;
  static bool fired = false;  // the first call only
  if (fired) return;
  fired = true;
  std::fprintf(stderr, "aerie dist: rank %d: AERIE_DIST_FAULT: %s in %.*s\n", rank, hang ? "hanging" : "exiting",
               int(op.size()), op.data());
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
