#include "dedloc/net/mailbox.hpp"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>

#include "dedloc/core/check.hpp"

namespace dedloc::net {

Doorbell::Doorbell() : fd_(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {
  // Out of file descriptors at construction: no sane way on.
  DEDLOC_CHECK(fd_ >= 0, "eventfd failed");
}

Doorbell::~Doorbell() { ::close(fd_); }

void Doorbell::ring() {
  std::uint64_t one = 1;
  // EAGAIN means the counter is saturated: the loop will wake anyway.
  while (::write(fd_, &one, sizeof one) < 0 && errno == EINTR) {
  }
}

void Doorbell::clear() {
  std::uint64_t value;
  while (::read(fd_, &value, sizeof value) < 0 && errno == EINTR) {
  }
}

}  // namespace dedloc::net
