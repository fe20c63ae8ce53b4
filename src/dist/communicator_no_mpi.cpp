// Built when MPI is absent (AERIE_MPI off): the single-process communicator is the only one.
#include "core/error.h"
#include "dist/communicator_mpi.h"

namespace aerie::dist {

bool mpi_built() { return false; }

std::unique_ptr<Communicator> make_mpi_communicator(double) { throw_error("aerie was built without MPI"); }

}  // namespace aerie::dist
