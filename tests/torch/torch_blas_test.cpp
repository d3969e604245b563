// Runs in a process linked with Debian's libtorch: the BLAS torch really calls must be an optimized one.
#include <catch2/catch.hpp>

#include <dlfcn.h>

#include "dedloc/core/blas.hpp"

using namespace dedloc;

TEST_CASE("A process linked with libtorch runs on an optimized BLAS", "[torch][blas]") {
  std::string loaded = loaded_blas_library();
  INFO("loaded BLAS: " << loaded);
  REQUIRE_FALSE(loaded.empty());  // libtorch_cpu links libblas.so.3
  CHECK_FALSE(is_reference_blas(loaded));
}

TEST_CASE("dedloc-train --threads reaches the BLAS library's own thread pool", "[torch][blas]") {
  // OpenBLAS (what scripts/setup-deps installs) reports its pool size; the cap must take.
  using GetThreads = int (*)();
  auto get = reinterpret_cast<GetThreads>(::dlsym(RTLD_DEFAULT, "openblas_get_num_threads"));
  REQUIRE(get != nullptr);
  REQUIRE(set_blas_threads(1));
  CHECK(get() == 1);
  REQUIRE(set_blas_threads(2));
  CHECK(get() == 2);
}
