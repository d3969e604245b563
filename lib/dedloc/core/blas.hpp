// Which BLAS this process runs on.
//
// Debian's libtorch links libblas.so.3, which the alternatives system points at either the reference
// (netlib) BLAS or an optimized one. Measured on our 2-core machines, a 4-layer transformer trained at
// 1.7 samples/s on the reference BLAS and 17.6 samples/s on OpenBLAS, so every binary that trains calls
// warn_if_reference_blas() at start-up. No torch headers needed: this inspects the loaded libraries.
#pragma once

#include <string>

#include "dedloc/core/log.hpp"

namespace dedloc {

// The resolved path of the BLAS library loaded in this process ("" if none is loaded).
std::string loaded_blas_library();

// True when `resolved_path` is Debian's netlib reference BLAS (…/blas/libblas.so.3).
bool is_reference_blas(const std::string& resolved_path);

// Caps the BLAS library's own thread pool at `threads` where it has one (OpenBLAS: openblas_set_num_threads,
// found at run time). torch::set_num_threads does not reach it: Debian's OpenBLAS starts a thread per core
// whatever torch is told, so `dedloc-train --threads 1` peers on one machine would still compete for every
// core. Returns false when the loaded BLAS offers no such control.
bool set_blas_threads(int threads);

// Logs a warning with the fix when the loaded BLAS is the reference one. Returns true if it warned.
bool warn_if_reference_blas(Logger& log);

}  // namespace dedloc
