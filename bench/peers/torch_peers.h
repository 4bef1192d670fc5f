// The libtorch side of the benchmarks, compiled in its own translation unit (torch's
// headers are heavy) and exposed through plain functions.
#pragma once

namespace peers {

// Microseconds per eager scalar add in a chain of `n` adds, median of `reps` runs.
double torch_scalar_chain_us_per_add(int n, int reps);

}  // namespace peers
