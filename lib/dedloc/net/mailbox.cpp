#include "dedloc/net/mailbox.hpp"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <system_error>

namespace dedloc::net {

Doorbell::Doorbell() : fd_(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {
  // Out of file descriptors (EMFILE): the client or server being made cannot work; whoever makes it decides.
  if (fd_ < 0) throw std::system_error(errno, std::generic_category(), "cannot make a mailbox's eventfd");
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
