// Runs in a process linked with Debian's libtorch: the BLAS torch really calls must be an optimized one.
#include <catch2/catch.hpp>

#include "dedloc/core/blas.hpp"

using namespace dedloc;

TEST_CASE("A process linked with libtorch runs on an optimized BLAS", "[torch][blas]") {
  std::string loaded = loaded_blas_library();
  INFO("loaded BLAS: " << loaded);
  REQUIRE_FALSE(loaded.empty());  // libtorch_cpu links libblas.so.3
  CHECK_FALSE(is_reference_blas(loaded));
}
