// The single-process communicator: the collectives of one rank are identities, and its checks name the
// mistake. The same collectives across 2 and 3 ranks run under mpirun (mpi_collectives.cpp, CMakeLists.txt).
#include "dist/communicator.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <vector>

#include "core/error.h"

namespace aerie::dist {
namespace {

TEST(LocalCommunicator, IsRankZeroOfOneAndCollectivesAreIdentities) {
  auto comm = make_local_communicator();
  EXPECT_EQ(comm->rank(), 0);
  EXPECT_EQ(comm->size(), 1);
  std::vector<float> data = {1.5f, -2.0f, 3.25f};
  comm->all_reduce_sum(data);
  EXPECT_EQ(data, (std::vector<float>{1.5f, -2.0f, 3.25f}));
  std::vector<std::byte> bytes = {std::byte{7}, std::byte{9}};
  comm->broadcast(bytes, 0);
  EXPECT_EQ(bytes[1], std::byte{9});
  const std::vector<float> send = {4, 5, 6};
  std::vector<float> recv(4, -1.0f);
  const std::vector<int> counts = {3};
  comm->all_to_all_v(send, counts, recv, counts);
  EXPECT_EQ(recv, (std::vector<float>{4, 5, 6, -1}));
  comm->barrier();
}

TEST(LocalCommunicator, RefusesAWrongRootOrMismatchedCounts) {
  auto comm = make_local_communicator();
  std::vector<std::byte> bytes(2);
  EXPECT_THROW(comm->broadcast(bytes, 1), Error);
  const std::vector<float> send = {1, 2};
  std::vector<float> recv(2);
  EXPECT_THROW(comm->all_to_all_v(send, std::vector<int>{2}, recv, std::vector<int>{1}), Error);
  EXPECT_THROW(comm->all_to_all_v(send, std::vector<int>{3}, recv, std::vector<int>{3}), Error);
  EXPECT_THROW(comm->all_to_all_v(send, std::vector<int>{1, 1}, recv, std::vector<int>{1, 1}), Error);
}

TEST(WorldCommunicator, IsTheLocalOneOutsideMpirun) {
  // ctest does not run this binary under mpirun, so none of the launcher's variables are set.
  ASSERT_EQ(std::getenv("OMPI_COMM_WORLD_SIZE"), nullptr);
  auto comm = make_world_communicator();
  EXPECT_EQ(comm->name(), "local");
  EXPECT_EQ(comm->size(), 1);
}

}  // namespace
}  // namespace aerie::dist
