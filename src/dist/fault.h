// Fault injection for the fault tests: AERIE_DIST_FAULT=RANK:OP[:exit|:hang[:N]] makes rank RANK exit with
// status 3 (or, with ":hang", sleep forever) when it enters collective OP (all_reduce_sum, broadcast,
// all_to_all_v, barrier) for the N-th time (default the first; "1:all_reduce_sum:exit:5" dies in the 5th
// all-reduce). The other ranks must then stop with a clear error within the timeout.
#pragma once

#include <string_view>

namespace aerie::dist {

// Called by each collective on entry; does nothing unless AERIE_DIST_FAULT names this rank and op.
void maybe_inject_fault(int rank, std::string_view op);

// AERIE_DIST_TIMEOUT_S when set and positive, else fallback.
double timeout_from_environment(double fallback);

}  // namespace aerie::dist
