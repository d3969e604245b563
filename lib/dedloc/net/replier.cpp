#include "dedloc/net/replier.hpp"

#include "dedloc/wire/messages.hpp"

namespace dedloc::net {

void Replier::fail(const Status& status) const {
  wire::ErrorReply error_reply{status.code(), status.message()};
  send(Outgoing::of(error_reply));
}

}  // namespace dedloc::net
