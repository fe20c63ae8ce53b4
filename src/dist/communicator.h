// The ranks of one multi-process run and the collectives between them (issue 22). One interface with two
// implementations: over MPI when the process was launched by mpirun, and a single-process one (rank 0 of
// 1) otherwise, so a tensor-parallel forward has one code path whatever the number of ranks.
//
// Faults: MPI collectives have no timeout, so every collective here is a non-blocking MPI call polled
// against a deadline (AERIE_DIST_TIMEOUT_S, default kDefaultTimeoutSeconds). A rank that dies or hangs makes
// each waiting rank print "aerie dist: rank R: <op> timed out after S s ..." and MPI_Abort the whole job
// (non-zero exit), never hang silently.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

namespace aerie::dist {

inline constexpr double kDefaultTimeoutSeconds = 120.0;

class Communicator {
 public:
  virtual ~Communicator() = default;
  Communicator() = default;
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  virtual int rank() const = 0;  // 0 .. size()-1
  virtual int size() const = 0;
  // "mpi" or "local": for logs and the bench.
  virtual std::string name() const = 0;

  // data [n] f32 on every rank -> the element-wise sum over ranks, in place on every rank.
  virtual void all_reduce_sum(std::span<float> data) = 0;
  // data on rank `root` -> the same bytes on every rank (every rank passes the same size).
  virtual void broadcast(std::span<std::byte> data, int root) = 0;
  // send [sum(send_counts)] f32, laid out as size() consecutive pieces, piece r of send_counts[r] elements
  // going to rank r; recv [sum(recv_counts)] f32 receives piece r (recv_counts[r] elements) from rank r in
  // rank order. send_counts[r] on this rank must equal recv_counts[this rank] on rank r.
  // Example, 2 ranks: rank 0 sends [a0 a1 | b0] with counts {2, 1}, rank 1 sends [c0 | d0 d1] with counts
  // {1, 2}; rank 0 receives [a0 a1 | c0] (recv_counts {2, 1}), rank 1 receives [b0 | d0 d1] ({1, 2}).
  virtual void all_to_all_v(std::span<const float> send, std::span<const int> send_counts, std::span<float> recv,
                            std::span<const int> recv_counts) = 0;
  // Returns once every rank has entered it.
  virtual void barrier() = 0;

  // What a failed or timed-out collective does: by default it prints why and ends the whole job
  // (MPI_Abort, exit status 70). With throw_on_failure it prints why and throws aerie::FatalError instead, and
  // every later collective throws at once (the ranks are out of step for good): for a server, which
  // answers its clients 503 before it ends the job with abort().
  void set_throw_on_failure(bool on) { throw_on_failure_ = on; }
  // Ends every rank of the job with exit status `status` (the single-process one: this process).
  [[noreturn]] virtual void abort(int status) = 0;

  // Wall time this rank has spent inside collectives so far (waiting for slower ranks included) and how many
  // it ran: the communication share of a tensor-parallel run. Always 0 for the single-process communicator.
  double collective_seconds() const { return collective_seconds_; }
  int64_t collective_calls() const { return collective_calls_; }
  // Bytes this rank has handed to the other ranks in collectives so far: its all-to-all pieces for other
  // ranks, 2 (n-1)/n of an all-reduce's buffer (what each rank of a ring sends), and at a broadcast's root
  // the buffer once per other rank. The communication volume of a parallel layout, independent of the
  // transport's algorithms; always 0 for the single-process communicator.
  double collective_bytes() const { return collective_bytes_; }

 protected:
  bool throw_on_failure_ = false;
  void count_collective(double seconds) {
    collective_seconds_ += seconds;
    ++collective_calls_;
  }
  void count_bytes(double bytes) { collective_bytes_ += bytes; }

 private:
  double collective_seconds_ = 0.0;
  int64_t collective_calls_ = 0;
  double collective_bytes_ = 0.0;
};

// The single-process communicator: rank 0 of 1; all_reduce_sum and broadcast leave data as it is,
// all_to_all_v copies send to recv.
std::unique_ptr<Communicator> make_local_communicator();

// True when this binary was built with MPI (AERIE_MPI).
bool mpi_available();

// The communicator of this run: MPI_COMM_WORLD when launched by mpirun (Open MPI's OMPI_COMM_WORLD_SIZE or
// a PMI/PMIx size is in the environment) and built with MPI, else the local one. Initialises MPI on first
// call (MPI_Finalize runs at exit); throws aerie::Error when launched by mpirun without MPI built in.
// timeout_seconds <= 0 reads AERIE_DIST_TIMEOUT_S (default kDefaultTimeoutSeconds).
std::unique_ptr<Communicator> make_world_communicator(double timeout_seconds = 0);

}  // namespace aerie::dist
