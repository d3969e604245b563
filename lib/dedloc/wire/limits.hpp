// Size limits for everything that arrives from the network. Every decoder takes these; nothing that a
// remote peer sends can make us allocate more than they allow.
#pragma once

#include <cstddef>

namespace dedloc::wire {

struct Limits {
  size_t max_header_bytes = 1u << 20;     // the msgpack header frame
  size_t max_frames = 64;                 // raw payload frames after the header
  size_t max_frame_bytes = 64u << 20;     // one payload frame (tensor parts are ~512 KiB - 4 MiB)
  size_t max_string_bytes = 64u << 10;    // any msgpack str
  size_t max_binary_bytes = 1u << 20;     // any msgpack bin inside the header (big data goes in frames)
  size_t max_collection_size = 1u << 16;  // entries of any msgpack array or map
  size_t max_depth = 16;                  // nesting of arrays and maps
};

}  // namespace dedloc::wire
