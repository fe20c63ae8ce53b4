// A small mutation fuzzer linked with each LLVMFuzzerTestOneInput target for the g++ ASan+UBSan build
// (CI: tools/fuzz.sh), where libFuzzer is not available. It takes libFuzzer's command line for the options
// it has, so one command runs either engine:
//
//   fuzz_<target> [-max_total_time=S] [-runs=N] [-seed=N] [-dict=FILE] [-timeout=S] [-max_len=N]
//                 [-rss_limit_mb=N] [-artifact_prefix=DIR/] CORPUS_DIR... | FILE...
//
// With directories it replays every file in them once, then mutates them (fuzz_mutator.h) until the time
// or run budget is spent. With files it only replays them. There is no coverage feedback; instead mutants
// that the target accepts (returns 0, not -1: the parser got through) join a pool that later mutations
// start from, so mutations pile up inside valid inputs instead of behind the first syntax error.
//
// Every input is written to <artifact_prefix>in-progress-<exe> before it runs, so even a kill leaves it on
// disk. A sanitizer report, an abort, an escaped exception, a timeout or the RSS limit saves it as
// <artifact_prefix>{crash,timeout,oom}-<hash> and prints that path; the exit status is then non-zero.
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "fuzz_mutator.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
extern "C" __attribute__((weak)) int LLVMFuzzerInitialize(int* argc, char*** argv);
// Present only in sanitized builds.
extern "C" __attribute__((weak)) void __sanitizer_set_death_callback(void (*callback)(void));
extern "C" __attribute__((weak)) void __sanitizer_print_stack_trace();
extern "C" __attribute__((weak)) int __sanitizer_install_malloc_and_free_hooks(
    void (*malloc_hook)(const volatile void*, size_t), void (*free_hook)(const volatile void*));
extern "C" __attribute__((weak)) int __lsan_do_recoverable_leak_check();

// Under g++ UBSan is a runtime of its own whose reports never reach ASan's death callback: it aborts
// instead, and the SIGABRT handler saves the input. UBSAN_OPTIONS adds to these.
extern "C" const char* __ubsan_default_options() { return "abort_on_error=1:print_stacktrace=1:halt_on_error=1"; }

namespace aerie::fuzz {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr size_t kPoolSize = 512;     // accepted mutants kept to mutate further
constexpr int kTimeoutExit = 70;      // libFuzzer's exit codes
constexpr int kOomExit = 71;
constexpr int kCrashExit = 77;
// Leak checks after inputs that allocated more than they freed; a target that keeps memory on purpose
// (caches) would pay one per input, so checking stops after this many found nothing.
constexpr int kMaxCleanLeakChecks = 1000;

struct Options {
  double max_total_time = 0;  // seconds; 0 with runs < 0: replay only
  int64_t runs = -1;
  uint64_t seed = 0;          // 0: from the clock
  std::vector<std::string> dictionaries;
  double timeout = 10;        // seconds per input
  size_t max_len = 0;         // 0: max(4096, twice the largest seed)
  int64_t rss_limit_mb = 2048;
  std::string artifact_prefix = "./";
  std::vector<std::string> inputs;
};

// What the signal handlers need, fixed before fuzzing starts (they may only read it).
struct CrashState {
  int in_progress_fd = -1;
  std::string in_progress_path;
  std::string artifact_prefix;
  const uint8_t* data = nullptr;  // the input running now
  size_t size = 0;
  std::atomic<int64_t> run_started_ns{0};  // steady clock; 0 between inputs
  std::atomic<int> watchdog_reason{0};     // 1 timeout, 2 oom
  std::atomic<bool> reported{false};
  pthread_t main_thread{};
  double timeout = 10;
  int64_t rss_limit_mb = 2048;
};
CrashState g_state;

void write_stderr(const char* text) {
  if (write(STDERR_FILENO, text, std::strlen(text)) < 0) return;
}

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
}

// Saves the running input as <prefix><kind>-<hash> and prints the path; async-signal-safe (no allocation).
void save_artifact(const char* kind) {
  if (g_state.reported.exchange(true)) return;
  uint64_t hash = 1469598103934665603ull;  // FNV-1a
  for (size_t i = 0; i < g_state.size; ++i) hash = (hash ^ g_state.data[i]) * 1099511628211ull;
  char path[4096];
  const size_t prefix = std::min(g_state.artifact_prefix.size(), sizeof(path) - 64);
  std::memcpy(path, g_state.artifact_prefix.data(), prefix);
  size_t n = prefix;
  for (const char* c = kind; *c; ++c) path[n++] = *c;
  path[n++] = '-';
  for (int shift = 60; shift >= 0; shift -= 4) path[n++] = "0123456789abcdef"[(hash >> shift) & 15];
  path[n] = '\0';
  const int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  size_t done = 0;
  while (fd >= 0 && done < g_state.size) {
    const ssize_t wrote = write(fd, g_state.data + done, g_state.size - done);
    if (wrote <= 0) break;
    done += size_t(wrote);
  }
  if (fd >= 0) close(fd);
  unlink(g_state.in_progress_path.c_str());  // the artifact holds it now
  write_stderr("\naerie-fuzz: ");
  write_stderr(kind);
  write_stderr("; reproducer: ");
  write_stderr(path);
  write_stderr(" (replay: <fuzz target> ");
  write_stderr(path);
  write_stderr(")\n");
}

void on_sanitizer_death() { save_artifact("crash"); }

void on_fatal_signal(int signal) {
  write_stderr(signal == SIGABRT ? "\naerie-fuzz: abort\n" : "\naerie-fuzz: deadly signal\n");
  save_artifact("crash");
  ::signal(signal, SIG_DFL);
  raise(signal);
}

// SIGALRM from the watchdog thread: this runs on the main thread, so the stack trace is the stuck one.
void on_watchdog(int) {
  const bool oom = g_state.watchdog_reason.load() == 2;
  write_stderr(oom ? "\naerie-fuzz: out of memory (RSS over -rss_limit_mb)\n" : "\naerie-fuzz: timeout\n");
  if (__sanitizer_print_stack_trace) __sanitizer_print_stack_trace();
  save_artifact(oom ? "oom" : "timeout");
  _exit(oom ? kOomExit : kTimeoutExit);
}

// Reads /proc/self/statm without allocating (the malloc hooks count allocations during a run).
int64_t resident_mb() {
  const int fd = open("/proc/self/statm", O_RDONLY);
  if (fd < 0) return 0;
  char text[128] = {};
  const ssize_t n = read(fd, text, sizeof(text) - 1);
  close(fd);
  if (n <= 0) return 0;
  const char* resident = std::strchr(text, ' ');
  return resident ? std::atoll(resident + 1) * sysconf(_SC_PAGESIZE) / (1 << 20) : 0;
}

// Allocations minus frees while an input runs (all threads; the watchdog does not allocate).
std::atomic<bool> g_tracing{false};
std::atomic<int64_t> g_net_allocations{0};
void on_malloc(const volatile void*, size_t) {
  if (g_tracing.load(std::memory_order_relaxed)) g_net_allocations.fetch_add(1, std::memory_order_relaxed);
}
void on_free(const volatile void*) {
  if (g_tracing.load(std::memory_order_relaxed)) g_net_allocations.fetch_sub(1, std::memory_order_relaxed);
}

// Checks the running input's time and the process's RSS ten times a second.
void watchdog() {
  for (;;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    const int64_t started = g_state.run_started_ns.load();
    int reason = 0;
    if (started != 0 && double(now_ns() - started) * 1e-9 > g_state.timeout) reason = 1;
    if (g_state.rss_limit_mb > 0 && resident_mb() > g_state.rss_limit_mb) reason = 2;
    if (reason == 0) continue;
    g_state.watchdog_reason = reason;
    pthread_kill(g_state.main_thread, SIGALRM);
    std::this_thread::sleep_for(std::chrono::seconds(10));
    _exit(reason == 2 ? kOomExit : kTimeoutExit);  // the main thread did not get to its handler
  }
}

// Sanitizers own SIGSEGV, SIGBUS and SIGFPE when present (their reports call on_sanitizer_death); these
// handlers take whatever signals are still at their default.
void install_handlers() {
  if (__sanitizer_set_death_callback) __sanitizer_set_death_callback(on_sanitizer_death);
  if (__sanitizer_install_malloc_and_free_hooks && __lsan_do_recoverable_leak_check) {
    __sanitizer_install_malloc_and_free_hooks(on_malloc, on_free);
  }
  for (int signal : {SIGABRT, SIGSEGV, SIGBUS, SIGFPE, SIGILL}) {
    struct sigaction current {};
    sigaction(signal, nullptr, &current);
    if (signal == SIGABRT || current.sa_handler == SIG_DFL) ::signal(signal, on_fatal_signal);
  }
  ::signal(SIGALRM, on_watchdog);
  g_state.main_thread = pthread_self();
  std::thread(watchdog).detach();
}

bool parse_flag(const std::string& arg, const char* name, std::string& value) {
  const std::string prefix = std::string("-") + name + "=";
  if (arg.rfind(prefix, 0) != 0) return false;
  value = arg.substr(prefix.size());
  return true;
}

Options parse_options(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    std::string value;
    if (parse_flag(arg, "max_total_time", value)) options.max_total_time = std::stod(value);
    else if (parse_flag(arg, "runs", value)) options.runs = std::stoll(value);
    else if (parse_flag(arg, "seed", value)) options.seed = std::stoull(value);
    else if (parse_flag(arg, "dict", value)) options.dictionaries.push_back(value);
    else if (parse_flag(arg, "timeout", value)) options.timeout = std::stod(value);
    else if (parse_flag(arg, "max_len", value)) options.max_len = std::stoull(value);
    else if (parse_flag(arg, "rss_limit_mb", value)) options.rss_limit_mb = std::stoll(value);
    else if (parse_flag(arg, "artifact_prefix", value)) options.artifact_prefix = value;
    else if (!arg.empty() && arg[0] == '-') throw std::runtime_error("unknown flag " + arg);
    else options.inputs.push_back(arg);
  }
  return options;
}

Bytes read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path.string());
  return Bytes(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// The files named, and the files in the directories named (sorted, not recursive).
std::vector<fs::path> input_files(const std::vector<std::string>& inputs, bool& any_directory) {
  std::vector<fs::path> files;
  any_directory = false;
  for (const std::string& input : inputs) {
    if (!fs::is_directory(input)) {
      files.emplace_back(input);
      continue;
    }
    any_directory = true;
    std::vector<fs::path> listed;
    for (const fs::directory_entry& entry : fs::directory_iterator(input)) {
      if (entry.is_regular_file()) listed.push_back(entry.path());
    }
    std::sort(listed.begin(), listed.end());
    files.insert(files.end(), listed.begin(), listed.end());
  }
  return files;
}

// After an input that kept allocations: LeakSanitizer looks for unreachable ones now, so a leak is
// pinned on this input (the default check at exit could not say which input leaked).
void check_leaks() {
  static int clean_checks = 0;
  if (!__lsan_do_recoverable_leak_check || g_net_allocations.load() <= 0 || clean_checks >= kMaxCleanLeakChecks) {
    return;
  }
  if (__lsan_do_recoverable_leak_check() == 0) {
    if (++clean_checks == kMaxCleanLeakChecks) write_stderr("aerie-fuzz: no leaks so far; per-input checks stop\n");
    return;
  }
  write_stderr("\naerie-fuzz: memory leak\n");
  save_artifact("leak");
  _exit(kCrashExit);
}

// Runs one input with the crash bookkeeping around it; returns the target's result (0 or -1).
int run_one(const Bytes& input) {
  g_state.data = input.data();
  g_state.size = input.size();
  if (pwrite(g_state.in_progress_fd, input.data(), input.size(), 0) != ssize_t(input.size()) ||
      ftruncate(g_state.in_progress_fd, off_t(input.size())) != 0) {
    throw std::runtime_error("cannot write " + g_state.in_progress_path);
  }
  g_net_allocations = 0;
  g_state.run_started_ns = now_ns();
  g_tracing = true;
  int result = 0;
  try {
    result = LLVMFuzzerTestOneInput(input.data(), input.size());
  } catch (const std::exception& e) {
    write_stderr("\naerie-fuzz: uncaught exception: ");
    write_stderr(e.what());
    save_artifact("crash");
    _exit(kCrashExit);
  }
  g_tracing = false;
  g_state.run_started_ns = 0;
  check_leaks();
  return result;
}

struct Stats {
  int64_t runs = 0;
  int64_t accepted = 0;
  Clock::time_point start = Clock::now();
  Clock::time_point last_print = Clock::now();
  double seconds() const { return std::chrono::duration<double>(Clock::now() - start).count(); }
};

void print_stats(const char* what, const Stats& stats, size_t pool) {
  std::fprintf(stderr, "aerie-fuzz: %s #%lld in %.1fs (%.0f/s), %lld accepted, pool %zu\n", what,
               static_cast<long long>(stats.runs), stats.seconds(),
               double(stats.runs) / std::max(stats.seconds(), 1e-9),
               static_cast<long long>(stats.accepted), pool);
}

// Mutates seeds and accepted mutants until the budget is spent.
void fuzz_loop(const Options& options, const std::vector<Bytes>& seeds, Mutator& mutator, Stats& stats) {
  std::vector<Bytes> pool;
  const std::vector<Bytes> empty_seed = {Bytes()};
  const std::vector<Bytes>& base = seeds.empty() ? empty_seed : seeds;
  size_t largest = 0;
  for (const Bytes& seed : base) largest = std::max(largest, seed.size());
  const size_t max_len = options.max_len ? options.max_len : std::max<size_t>(4096, 2 * largest);
  Bytes input;
  for (;;) {
    if (options.runs >= 0 && stats.runs >= options.runs) break;
    if (options.max_total_time > 0 && stats.seconds() >= options.max_total_time) break;
    const bool from_pool = !pool.empty() && mutator.below(2) == 0;
    input = from_pool ? pool[mutator.below(pool.size())] : base[mutator.below(base.size())];
    const Bytes& other = mutator.below(2) == 0 && !pool.empty() ? pool[mutator.below(pool.size())]
                                                                : base[mutator.below(base.size())];
    mutator.mutate(input, other, max_len);
    const int result = run_one(input);
    ++stats.runs;
    if (result != -1) {
      ++stats.accepted;
      if (pool.size() < kPoolSize) pool.push_back(input);
      else pool[mutator.below(kPoolSize)] = input;
    }
    if (Clock::now() - stats.last_print > std::chrono::seconds(10)) {
      stats.last_print = Clock::now();
      print_stats("progress", stats, pool.size());
    }
  }
  print_stats("done", stats, pool.size());
}

int run_driver(int argc, char** argv) {
  const Options options = parse_options(argc, argv);
  bool fuzz = false;
  const std::vector<fs::path> files = input_files(options.inputs, fuzz);
  if (fuzz && options.runs < 0 && options.max_total_time <= 0) {
    throw std::runtime_error("give -max_total_time or -runs");
  }
  std::vector<Bytes> seeds;
  for (const fs::path& file : files) seeds.push_back(read_file(file));

  g_state.artifact_prefix = options.artifact_prefix;
  g_state.in_progress_path = options.artifact_prefix + "in-progress-" + fs::path(argv[0]).filename().string();
  g_state.in_progress_fd = open(g_state.in_progress_path.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0644);
  if (g_state.in_progress_fd < 0) throw std::runtime_error("cannot create " + g_state.in_progress_path);
  g_state.timeout = options.timeout;
  g_state.rss_limit_mb = options.rss_limit_mb;
  install_handlers();

  // Every seed once as it is: the corpus holds the regression inputs of past crashes.
  Stats stats;
  for (size_t i = 0; i < seeds.size(); ++i) {
    run_one(seeds[i]);
    ++stats.runs;
  }
  std::fprintf(stderr, "aerie-fuzz: replayed %zu inputs\n", seeds.size());
  if (fuzz && options.runs != 0) {
    std::vector<Bytes> dictionary;
    for (const std::string& path : options.dictionaries) {
      for (Bytes& token : read_dictionary(path)) dictionary.push_back(std::move(token));
    }
    const uint64_t seed = options.seed ? options.seed : uint64_t(now_ns()) | 1;
    std::fprintf(stderr, "aerie-fuzz: seed %llu (-seed=%llu repeats this run), %zu dictionary tokens\n",
                 static_cast<unsigned long long>(seed), static_cast<unsigned long long>(seed), dictionary.size());
    Mutator mutator(seed, std::move(dictionary));
    stats.runs = 0;  // -runs counts mutants
    fuzz_loop(options, seeds, mutator, stats);
  }
  close(g_state.in_progress_fd);
  unlink(g_state.in_progress_path.c_str());
  return 0;
}

}  // namespace
}  // namespace aerie::fuzz

int main(int argc, char** argv) {
  if (LLVMFuzzerInitialize) LLVMFuzzerInitialize(&argc, &argv);
  try {
    return aerie::fuzz::run_driver(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "aerie-fuzz: %s\n", e.what());
    return 2;
  }
}
