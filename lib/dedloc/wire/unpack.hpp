// Bounded msgpack decoding: the one place bytes from the network become msgpack objects.
#pragma once

#include <memory>
#include <string_view>

#include <msgpack.hpp>

#include "dedloc/core/bytes.hpp"
#include "dedloc/core/status.hpp"
#include "dedloc/wire/limits.hpp"

namespace dedloc::wire {

// Decodes exactly one msgpack object filling all of `bytes` (`what` names it in errors: "header", "value").
// Strings and binaries are copied out, so the object never points into `bytes`. kTooLarge over any limit
// (size, collection, string, binary, depth), kMalformed for invalid msgpack or trailing bytes.
Result<std::shared_ptr<msgpack::object_handle>> unpack_bounded(ByteSpan bytes, const Limits& limits,
                                                               std::string_view what);

}  // namespace dedloc::wire
