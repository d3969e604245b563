#include "dedloc/core/memory.hpp"

#include <mutex>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace dedloc {

void keep_freed_memory() {
  static std::once_flag once;
  std::call_once(once, [] {
#if defined(__GLIBC__)
    mallopt(M_MMAP_THRESHOLD, 32 << 20);  // glibc's largest; setting it also stops its dynamic adjustment
    mallopt(M_TRIM_THRESHOLD, 1 << 30);
#endif
  });
}

}  // namespace dedloc
