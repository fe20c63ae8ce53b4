// The communicator over MPI_COMM_WORLD (Open MPI). Every collective is the non-blocking MPI call followed by
// MPI_Test polling against a deadline: MPI itself would wait forever for a rank that died or hangs.
#include <mpi.h>

#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "core/error.h"
#include "dist/communicator_mpi.h"
#include "dist/fault.h"

namespace aerie::dist {
namespace {

// Set once a collective of this process failed: the ranks are out of step for good.
bool g_collective_failed = false;

// Ends the job: MPI_Abort kills every rank. Open MPI's MPI_Abort first hands its help text to mpirun and
// waits for the acknowledgement; when mpirun is already ending the job (it does once a rank has died) that
// never comes, and the process slept in MPI_Abort until mpirun's SIGKILL (odls_base_sigkill_timeout, which
// docs/multi-process.md "Faults" advises setting long). A watchdog exits the process instead after kAbortGrace: a rank 0 that
// exits non-zero makes mpirun end the others.
[[noreturn]] void abort_job(int status) {
  constexpr auto kAbortGrace = std::chrono::seconds(2);
  std::thread([status, kAbortGrace] {
    std::this_thread::sleep_for(kAbortGrace);
    std::_Exit(status);
  }).detach();
  MPI_Abort(MPI_COMM_WORLD, status);
  std::_Exit(status);  // MPI_Abort does not return; in case it does
}

// MPI_Finalize at exit for a process that initialised MPI here (a static's destructor runs after main).
struct MpiSession {
  MpiSession() {
    int provided = 0;
    // Collectives are called from one thread at a time, not always the one that initialised MPI (the
    // server's engine loop thread runs the forwards and their all-reduces).
    MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided);
    // Errors come back as return codes, which check() turns into a message naming rank and operation.
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  }
  ~MpiSession() {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized) return;
    // After a failed collective MPI_Finalize waits on a dead rank (or on the request that never completed)
    // until mpirun's SIGKILL, however long its grace: this process has decided to exit, so end the job now.
    if (g_collective_failed) {
      std::fflush(nullptr);
      abort_job(1);
    }
    MPI_Finalize();
  }
};

class MpiCommunicator final : public Communicator {
 public:
  explicit MpiCommunicator(double timeout_seconds) : timeout_seconds_(timeout_seconds) {
    static MpiSession session;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string name() const override { return "mpi"; }

  void all_reduce_sum(std::span<float> data) override {
    check_not_broken("all_reduce_sum");
    maybe_inject_fault(rank_, "all_reduce_sum");
    AERIE_CHECK(data.size() <= size_t(INT_MAX), "all_reduce_sum: ", data.size(), " floats is over MPI's int count");
    count_bytes(2.0 * double(size_ - 1) / double(size_) * double(data.size() * sizeof(float)));
    MPI_Request request;
    check(MPI_Iallreduce(MPI_IN_PLACE, data.data(), int(data.size()), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &request),
          "all_reduce_sum");
    wait(request, "all_reduce_sum");
  }

  void broadcast(std::span<std::byte> data, int root) override {
    check_not_broken("broadcast");
    maybe_inject_fault(rank_, "broadcast");
    AERIE_CHECK(root >= 0 && root < size_, "broadcast: root ", root, " is not a rank of ", size_);
    AERIE_CHECK(data.size() <= size_t(INT_MAX), "broadcast: ", data.size(), " bytes is over MPI's int count");
    if (rank_ == root) count_bytes(double(size_ - 1) * double(data.size()));
    MPI_Request request;
    check(MPI_Ibcast(data.data(), int(data.size()), MPI_BYTE, root, MPI_COMM_WORLD, &request), "broadcast");
    wait(request, "broadcast");
  }

  void all_to_all_v(std::span<const float> send, std::span<const int> send_counts, std::span<float> recv,
                    std::span<const int> recv_counts) override {
    check_not_broken("all_to_all_v");
    maybe_inject_fault(rank_, "all_to_all_v");
    AERIE_CHECK(send_counts.size() == size_t(size_) && recv_counts.size() == size_t(size_),
                "all_to_all_v: one send and one receive count per rank (", size_, ")");
    // Displacements: piece r starts after pieces 0..r-1 (members: no allocation per call once grown).
    std::vector<int>& send_offsets = send_offsets_;
    std::vector<int>& recv_offsets = recv_offsets_;
    send_offsets.resize(static_cast<size_t>(size_));
    recv_offsets.resize(static_cast<size_t>(size_));
    long long send_total = 0, recv_total = 0;
    for (int r = 0; r < size_; ++r) {
      AERIE_CHECK(send_counts[r] >= 0 && recv_counts[r] >= 0, "all_to_all_v: negative count for rank ", r);
      send_offsets[size_t(r)] = int(send_total);
      recv_offsets[size_t(r)] = int(recv_total);
      send_total += send_counts[r];
      recv_total += recv_counts[r];
    }
    AERIE_CHECK(send_total <= (long long)send.size() && recv_total <= (long long)recv.size() && send_total <= INT_MAX &&
                    recv_total <= INT_MAX,
                "all_to_all_v: counts (send ", send_total, ", receive ", recv_total, ") overrun the buffers (",
                send.size(), ", ", recv.size(), ")");
    count_bytes(double(send_total - send_counts[rank_]) * double(sizeof(float)));
    MPI_Request request;
    check(MPI_Ialltoallv(send.data(), send_counts.data(), send_offsets.data(), MPI_FLOAT, recv.data(),
                         recv_counts.data(), recv_offsets.data(), MPI_FLOAT, MPI_COMM_WORLD, &request),
          "all_to_all_v");
    wait(request, "all_to_all_v");
  }

  void barrier() override {
    check_not_broken("barrier");
    maybe_inject_fault(rank_, "barrier");
    MPI_Request request;
    check(MPI_Ibarrier(MPI_COMM_WORLD, &request), "barrier");
    wait(request, "barrier");
  }

 private:
  // An MPI error: name it, rank and operation, and take the whole job down (the others would wait for us).
  void check(int code, const char* op) {
    if (code == MPI_SUCCESS) return;
    char text[MPI_MAX_ERROR_STRING];
    int length = 0;
    MPI_Error_string(code, text, &length);
    fail(str_cat("rank ", rank_, " of ", size_, ": ", op, " failed: ", std::string_view(text, size_t(length))));
  }

  [[noreturn]] void abort(int status) override {
    std::fflush(nullptr);
    abort_job(status);
  }

  // A collective that failed or timed out: the whole job ends, or (throw_on_failure) this call and every
  // later one throws.
  [[noreturn]] void fail(const std::string& why) {
    std::fprintf(stderr, "aerie dist: %s; %s\n", why.c_str(), throw_on_failure_ ? "giving up" : "aborting the job");
    std::fflush(stderr);
    g_collective_failed = true;
    if (!throw_on_failure_) abort(70);
    broken_ = why;
    throw FatalError("aerie dist: " + why);
  }
  void check_not_broken(const char* op) const {
    if (!broken_.empty()) throw FatalError(str_cat("aerie dist: ", op, " after an earlier collective failed (", broken_, ")"));
  }

  // Polls request until it completes or the deadline passes. Tight polling first (loopback latency is a few
  // microseconds), then yielding, then 100 us sleeps: ranks may outnumber cores (mpirun --oversubscribe).
  void wait(MPI_Request& request, const char* op) {
    using Clock = std::chrono::steady_clock;
    const auto start = Clock::now();
    const auto deadline = start + std::chrono::duration<double>(timeout_seconds_);
    for (long poll = 0;; ++poll) {
      int done = 0;
      check(MPI_Test(&request, &done, MPI_STATUS_IGNORE), op);
      if (done) {
        count_collective(std::chrono::duration<double>(Clock::now() - start).count());
        return;
      }
      if (poll < 2000) continue;
      const auto now = Clock::now();
      if (now > deadline) {
        char seconds[32];
        std::snprintf(seconds, sizeof seconds, "%.1f", timeout_seconds_);
        fail(str_cat("rank ", rank_, " of ", size_, ": ", op, " timed out after ", seconds,
                     " s waiting for the other ranks (one died or hangs; AERIE_DIST_TIMEOUT_S sets the limit)"));
      }
      if (now - start < std::chrono::milliseconds(10)) {
        std::this_thread::yield();
      } else {
        std::this_thread::sleep_for(std::chrono::microseconds(100));
      }
    }
  }

  double timeout_seconds_;
  std::string broken_;  // why a collective failed under throw_on_failure; empty while all is well
  int rank_ = 0;
  int size_ = 1;
  std::vector<int> send_offsets_, recv_offsets_;  // all_to_all_v's displacements, reused
};

}  // namespace

bool mpi_built() { return true; }

std::unique_ptr<Communicator> make_mpi_communicator(double timeout_seconds) {
  return std::make_unique<MpiCommunicator>(timeout_seconds);
}

}  // namespace aerie::dist
