// Run under `mpirun -np N` (N = 2, 3; tests/dist/CMakeLists.txt): every collective of the MPI communicator
// against values each rank can compute on its own. Values are small integers, so float sums are exact in any
// order. Exits 0 when all match on every rank, 1 otherwise (each rank prints its first mismatch).
// With AERIE_DIST_FAULT set, the fault tests (run_fault_test.sh) use it as the job that must stop.
#include <cstdint>
#include <cstdio>
#include <vector>

#include "dist/communicator.h"

namespace {

int failures = 0;

void expect(bool ok, int rank, const char* what, size_t index) {
  if (ok) return;
  if (failures++ == 0) std::fprintf(stderr, "rank %d: %s wrong at %zu\n", rank, what, index);
}

}  // namespace

int main() {
  auto comm = aerie::dist::make_world_communicator();
  const int rank = comm->rank(), n_ranks = comm->size();
  if (comm->name() != "mpi" || n_ranks < 2) {
    std::fprintf(stderr, "mpi_collectives: expected an MPI run of 2+ ranks, got %s with %d\n", comm->name().c_str(),
                 n_ranks);
    return 1;
  }
  // all_reduce_sum: rank r holds r * 1000 + i (i % 97 for the large case); the sum is known.
  for (size_t n : {size_t(1), size_t(4096), size_t(1) << 20}) {
    std::vector<float> data(n);
    for (size_t i = 0; i < n; ++i) data[i] = float(rank * 1000 + int(i % 97));
    comm->all_reduce_sum(data);
    const int rank_sum = n_ranks * (n_ranks - 1) / 2;
    for (size_t i = 0; i < n; ++i)
      expect(data[i] == float(rank_sum * 1000 + n_ranks * int(i % 97)), rank, "all_reduce_sum", i);
  }
  // all_to_all_v: rank s sends rank d a piece of s + d + 1 values s * 100 + d * 10 + j (uneven pieces).
  std::vector<int> send_counts(static_cast<size_t>(n_ranks)), recv_counts(static_cast<size_t>(n_ranks));
  std::vector<float> send, expected;
  for (int d = 0; d < n_ranks; ++d) {
    send_counts[size_t(d)] = rank + d + 1;
    for (int j = 0; j < rank + d + 1; ++j) send.push_back(float(rank * 100 + d * 10 + j));
  }
  for (int s = 0; s < n_ranks; ++s) {
    recv_counts[size_t(s)] = s + rank + 1;
    for (int j = 0; j < s + rank + 1; ++j) expected.push_back(float(s * 100 + rank * 10 + j));
  }
  std::vector<float> recv(expected.size(), -1.0f);
  comm->all_to_all_v(send, send_counts, recv, recv_counts);
  for (size_t i = 0; i < recv.size(); ++i) expect(recv[i] == expected[i], rank, "all_to_all_v", i);
  // broadcast from the last rank: only it holds the pattern beforehand.
  std::vector<std::byte> bytes(1000);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = rank == n_ranks - 1 ? std::byte(i * 7 % 251) : std::byte{0};
  comm->broadcast(bytes, n_ranks - 1);
  for (size_t i = 0; i < bytes.size(); ++i) expect(bytes[i] == std::byte(i * 7 % 251), rank, "broadcast", i);
  comm->barrier();
  // collective_bytes: what this rank handed the others, by the definitions in dist/communicator.h.
  double want_bytes = 0;
  for (size_t n : {size_t(1), size_t(4096), size_t(1) << 20})
    want_bytes += 2.0 * double(n_ranks - 1) / double(n_ranks) * double(n * sizeof(float));
  int64_t pieces = 0;  // floats of this rank's all-to-all pieces for the others (added as one figure)
  for (int d = 0; d < n_ranks; ++d)
    if (d != rank) pieces += rank + d + 1;
  want_bytes += double(pieces) * double(sizeof(float));
  if (rank == n_ranks - 1) want_bytes += double(n_ranks - 1) * double(bytes.size());
  expect(comm->collective_bytes() == want_bytes, rank, "collective_bytes", 0);
  if (rank == 0 && failures == 0) std::printf("mpi_collectives: %d ranks agree\n", n_ranks);
  return failures == 0 ? 0 : 1;
}
