#include "dedloc/core/codec_id.hpp"

#include <string>

namespace dedloc {
namespace {

static_assert([] {
  for (std::size_t i = 0; i < kCodecs.size(); ++i)
    if (static_cast<std::size_t>(kCodecs[i].codec) != i) return false;
  return true;
}(), "kCodecs is indexed by wire number");

// Spellings accepted from older configurations, each with the name that replaced it.
struct OldName {
  std::string_view name;
  Codec codec;
};
constexpr std::array<OldName, 1> kOldNames = {{{"blockwise-8bit", Codec::kBlockwise8Bit}}};

const CodecInfo* info(Codec codec) {
  const auto index = static_cast<std::size_t>(codec);
  return index < kCodecs.size() ? &kCodecs[index] : nullptr;
}

}  // namespace

std::string_view codec_name(Codec codec) {
  const CodecInfo* found = info(codec);
  return found ? found->name : std::string_view("unknown");
}

double bytes_per_value(Codec codec) {
  const CodecInfo* found = info(codec);
  return found ? found->bytes_per_value : 4;
}

Result<Codec> parse_codec(std::string_view name, Logger* log) {
  for (const CodecInfo& known : kCodecs)
    if (known.name == name) return known.codec;
  for (const OldName& old : kOldNames) {
    if (old.name != name) continue;
    if (log) {
      log->warn("config") << "codec '" << old.name << "' is the old name of '" << codec_name(old.codec)
                          << "': write '" << codec_name(old.codec) << "'";
    }
    return old.codec;
  }
  std::string message = "unknown codec '" + std::string(name) + "' (one of:";
  for (const CodecInfo& known : kCodecs) message += " " + std::string(known.name);
  message += name == "adaptive" ? "; 'adaptive' is a policy, not a codec)" : ")";
  return error(Code::kInvalidArgument, std::move(message));
}

Result<Codec> codec_from_wire(std::uint64_t value) {
  if (value < kCodecs.size()) return kCodecs[static_cast<std::size_t>(value)].codec;
  return error(Code::kMalformed, "unknown codec number " + std::to_string(value));
}

}  // namespace dedloc
