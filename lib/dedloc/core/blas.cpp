#include "dedloc/core/blas.hpp"

#include <dlfcn.h>
#include <link.h>

#include <climits>
#include <cstdlib>
#include <string_view>

namespace dedloc {

namespace {

bool looks_like_blas(std::string_view path) {
  auto slash = path.rfind('/');
  std::string_view file = slash == std::string_view::npos ? path : path.substr(slash + 1);
  return file.rfind("libblas.so", 0) == 0 || file.rfind("libopenblas", 0) == 0 ||
         file.rfind("libblis", 0) == 0 || file.rfind("libmkl_rt", 0) == 0;
}

std::string resolve(const char* path) {
  char buf[PATH_MAX];
  if (::realpath(path, buf)) return buf;
  return path;
}

}  // namespace

std::string loaded_blas_library() {
  std::string found;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) -> int {
        auto* out = static_cast<std::string*>(data);
        if (info->dlpi_name && looks_like_blas(info->dlpi_name)) {
          *out = resolve(info->dlpi_name);
          // libblas.so.3 is the interface torch calls; prefer it over libraries it merely pulls in.
          if (std::string_view(info->dlpi_name).find("libblas.so") != std::string_view::npos) return 1;
        }
        return 0;
      },
      &found);
  return found;
}

bool is_reference_blas(const std::string& resolved_path) {
  // Debian installs netlib's BLAS as /usr/lib/<triplet>/blas/libblas.so.3.x; optimized ones live in
  // openblas-pthread/, openblas-openmp/, blis-*/ or atlas/.
  return resolved_path.find("/blas/libblas.so") != std::string::npos;
}

bool set_blas_threads(int threads) {
  using SetThreads = void (*)(int);
  auto set = reinterpret_cast<SetThreads>(::dlsym(RTLD_DEFAULT, "openblas_set_num_threads"));
  if (set == nullptr) return false;
  set(threads);
  return true;
}

bool warn_if_reference_blas(Logger& log) {
  std::string blas = loaded_blas_library();
  if (blas.empty() || !is_reference_blas(blas)) return false;
  log.warn("blas") << "torch runs on the reference BLAS (" << blas
                   << "): training will be about 10x slower. Fix: apt-get install libopenblas0-pthread "
                      "(scripts/setup-deps does this)";
  return true;
}

}  // namespace dedloc
