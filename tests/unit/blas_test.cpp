#include <catch2/catch.hpp>

#include <dlfcn.h>

#include "dedloc/core/blas.hpp"

using namespace dedloc;

TEST_CASE("Debian's reference BLAS is recognized as such", "[unit][blas]") {
  CHECK(is_reference_blas("/usr/lib/x86_64-linux-gnu/blas/libblas.so.3.11.0"));
  CHECK_FALSE(is_reference_blas("/usr/lib/x86_64-linux-gnu/openblas-pthread/libblas.so.3"));
  CHECK_FALSE(is_reference_blas("/usr/lib/x86_64-linux-gnu/blis-pthread/libblas.so.3"));
}

TEST_CASE("The BLAS that libblas.so.3 resolves to on this machine is an optimized one", "[unit][blas]") {
  // The same lookup libtorch's dynamic link performs. scripts/setup-deps installs OpenBLAS, which registers
  // itself as the preferred libblas.so.3 alternative.
  void* handle = dlopen("libblas.so.3", RTLD_NOW | RTLD_LOCAL);
  REQUIRE(handle != nullptr);
  std::string loaded = loaded_blas_library();
  INFO("loaded BLAS: " << loaded);
  CHECK_FALSE(loaded.empty());
  CHECK_FALSE(is_reference_blas(loaded));
  Logger quiet(LogLevel::kOff);
  CHECK_FALSE(warn_if_reference_blas(quiet));
  dlclose(handle);
}
