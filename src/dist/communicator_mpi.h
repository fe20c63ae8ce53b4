// The MPI communicator (communicator_mpi.cpp when AERIE_MPI, communicator_no_mpi.cpp otherwise). Internal to
// dist/: use make_world_communicator.
#pragma once

#include <memory>

#include "dist/communicator.h"

namespace aerie::dist {

bool mpi_built();
// MPI_COMM_WORLD with every collective bounded by timeout_seconds; initialises MPI once per process.
std::unique_ptr<Communicator> make_mpi_communicator(double timeout_seconds);

}  // namespace aerie::dist
