// aerie-bench-comm: latency of the collectives a parallel forward uses, between the ranks of
// `mpirun -np N aerie-bench-comm [--iters I]`. Sizes are rows of a hidden state: Llama 3 8B's n_embd 4096 and
// DeepSeek-V3's 7168, for 1 token (decode) and 64 tokens (a verification or prefill chunk). Rank 0 prints,
// per operation and size, the median and the 90th percentile over I timed calls (after I/10 warm-up calls).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <vector>

#include "dist/communicator.h"

namespace {

using aerie::dist::Communicator;

// Times op iters times (each call's start aligned by a barrier) and prints rank 0's median and p90.
void time_op(Communicator& comm, const char* op, size_t n_floats, int iters, const std::function<void()>& call) {
  for (int i = 0; i < iters / 10 + 1; ++i) call();
  std::vector<double> micros;
  for (int i = 0; i < iters; ++i) {
    comm.barrier();
    const auto start = std::chrono::steady_clock::now();
    call();
    micros.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(micros.begin(), micros.end());
  if (comm.rank() == 0) {
    std::printf("%-15s %9zu floats %8.1f KiB  median %9.1f us  p90 %9.1f us\n", op, n_floats, n_floats * 4 / 1024.0,
                micros[micros.size() / 2], micros[micros.size() * 9 / 10]);
  }
}

}  // namespace

int main(int argc, char** argv) {
  int iters = 200;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--iters") == 0 && i + 1 < argc) {
      iters = std::max(1, std::atoi(argv[++i]));
    } else {
      std::fprintf(stderr, "usage: [mpirun -np N] aerie-bench-comm [--iters I]\n");
      return 2;
    }
  }
  auto comm = aerie::dist::make_world_communicator();
  const int n_ranks = comm->size();
  if (comm->rank() == 0)
    std::printf("aerie-bench-comm: %d ranks (%s), %d iterations\n", n_ranks, comm->name().c_str(), iters);
  for (size_t n : {size_t(4096), size_t(7168), size_t(64 * 4096), size_t(64 * 7168)}) {
    std::vector<float> data(n, 1.0f);
    time_op(*comm, "all_reduce_sum", n, iters, [&] { comm->all_reduce_sum(data); });
  }
  // all_to_all_v: each rank sends an equal share of the rows to every rank (expert-parallel dispatch).
  for (size_t n : {size_t(7168), size_t(64 * 7168)}) {
    const int piece = int(n / size_t(n_ranks));
    std::vector<int> counts(size_t(n_ranks), piece);
    std::vector<float> send(size_t(piece) * size_t(n_ranks), 1.0f), recv(send.size());
    time_op(*comm, "all_to_all_v", send.size(), iters, [&] { comm->all_to_all_v(send, counts, recv, counts); });
  }
  std::vector<std::byte> tokens(64 * sizeof(int));
  time_op(*comm, "broadcast", tokens.size() / 4, iters, [&] { comm->broadcast(tokens, 0); });
  return 0;
}
