#include "dedloc/net/caller.hpp"

#include <memory>

namespace dedloc::net {

PendingCall Caller::call(const std::string& endpoint, Outgoing request, Deadline deadline) {
  auto promise = std::make_shared<std::promise<Result<Incoming>>>();
  PendingCall pending(promise->get_future());
  call(endpoint, std::move(request), deadline,
       [promise](Result<Incoming>&& outcome) { promise->set_value(std::move(outcome)); });
  return pending;
}

}  // namespace dedloc::net
