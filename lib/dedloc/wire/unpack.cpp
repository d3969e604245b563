#include "dedloc/wire/unpack.hpp"

#include <string>

namespace dedloc::wire {

Result<std::shared_ptr<msgpack::object_handle>> unpack_bounded(ByteSpan bytes, const Limits& limits,
                                                               std::string_view what_view) {
  const std::string what(what_view);
  if (bytes.size() > limits.max_header_bytes) {
    return error(Code::kTooLarge, what + " of " + std::to_string(bytes.size()) + " bytes is over the limit of " +
                                      std::to_string(limits.max_header_bytes));
  }
  msgpack::unpack_limit limit(limits.max_collection_size, limits.max_collection_size, limits.max_string_bytes,
                              limits.max_binary_bytes, 0, limits.max_depth);
  auto handle = std::make_shared<msgpack::object_handle>();
  size_t offset = 0;
  try {
    auto copy_all = [](msgpack::type::object_type, std::size_t, void*) { return false; };
    *handle = msgpack::unpack(reinterpret_cast<const char*>(bytes.data()), bytes.size(), offset, copy_all, nullptr,
                              limit);
  } catch (const msgpack::depth_size_overflow&) {
    return error(Code::kTooLarge, what + " nests deeper than " + std::to_string(limits.max_depth));
  } catch (const msgpack::size_overflow& e) {
    return error(Code::kTooLarge, what + " has a collection, string or binary over its limit (" + e.what() + ")");
  } catch (const std::exception& e) {
    return error(Code::kMalformed, what + " is not valid msgpack (" + e.what() + ")");
  }
  if (offset != bytes.size()) {
    return error(Code::kMalformed, what + " has " + std::to_string(bytes.size() - offset) + " trailing bytes");
  }
  return handle;
}

}  // namespace dedloc::wire
