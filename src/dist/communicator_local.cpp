// The single-process communicator (rank 0 of 1) and the choice between it and MPI.
#include <algorithm>
#include <cstdlib>

#include "core/error.h"
#include "dist/communicator.h"
#include "dist/fault.h"
#include "dist/communicator_mpi.h"

namespace aerie::dist {
namespace {

class LocalCommunicator final : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string name() const override { return "local"; }
  void all_reduce_sum(std::span<float>) override { maybe_inject_fault(0, "all_reduce_sum"); }
  void broadcast(std::span<std::byte>, int root) override {
    maybe_inject_fault(0, "broadcast");
    AERIE_CHECK(root == 0, "broadcast: root ", root, " is not a rank of a single-process run");
  }
  void all_to_all_v(std::span<const float> send, std::span<const int> send_counts, std::span<float> recv,
                    std::span<const int> recv_counts) override {
    maybe_inject_fault(0, "all_to_all_v");
    AERIE_CHECK(send_counts.size() == 1 && recv_counts.size() == 1, "all_to_all_v: one count per rank (1 rank)");
    AERIE_CHECK(send_counts[0] == recv_counts[0] && size_t(send_counts[0]) <= send.size() &&
                    size_t(recv_counts[0]) <= recv.size(),
                "all_to_all_v: send count ", send_counts[0], " and receive count ", recv_counts[0],
                " differ or overrun");
    std::copy_n(send.begin(), send_counts[0], recv.begin());
  }
  void barrier() override { maybe_inject_fault(0, "barrier"); }
  [[noreturn]] void abort(int status) override {
    std::fflush(nullptr);
    std::_Exit(status);
  }
};

// Set by mpirun / a PMI launcher in every rank's environment.
bool launched_by_mpirun() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"}) {
    if (std::getenv(name) != nullptr) return true;
  }
  return false;
}

}  // namespace

std::unique_ptr<Communicator> make_local_communicator() { return std::make_unique<LocalCommunicator>(); }

bool mpi_available() { return mpi_built(); }

std::unique_ptr<Communicator> make_world_communicator(double timeout_seconds) {
  if (timeout_seconds <= 0) timeout_seconds = timeout_from_environment(kDefaultTimeoutSeconds);
  if (!launched_by_mpirun()) return make_local_communicator();
  AERIE_CHECK(mpi_built(), "launched by mpirun, but this aerie was built without MPI (configure with -DAERIE_MPI=ON "
                           "and libopenmpi-dev installed)");
  return make_mpi_communicator(timeout_seconds);
}

}  // namespace aerie::dist
