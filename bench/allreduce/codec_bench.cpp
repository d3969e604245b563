// bench/allreduce: throughput and accuracy of the all-reduce part codecs (lib/dedloc/avg/codec.hpp).
//
// A vector of --elements normal(0, 1) floats is cut into parts of --part-elements (0: one part) and every
// part encoded, then decoded, with each codec. Reported per codec: encode and decode GB/s, counting the
// float32 bytes of the input (so the codecs compare on the work they do for the all-reduce, whatever their
// output size), the median over --repeats runs; the measured worst error max|x' − x| / max|x|; and the
// documented bound (error_bound, worst over parts) on the same scale. The "portable" columns time the plain
// C++ kernels that CPUs without SSE2/F16C run (detail::Kernels::kPortable; identical bytes). Buffers are
// allocated and touched before timing starts.
//
// Usage: bench_codecs [--elements N] [--repeats R] [--part-elements P] [--json]
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "dedloc/avg/codec.hpp"

using namespace dedloc;
using namespace dedloc::avg;
using SteadyClock = std::chrono::steady_clock;

namespace {

struct Row {
  std::string codec;
  double bytes_per_element = 0;
  double encode_gbps = 0;
  double decode_gbps = 0;
  double portable_encode_gbps = 0;
  double portable_decode_gbps = 0;
  double max_error = 0;  // relative to max|x|
  double bound = 0;      // relative to max|x|
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
}

double seconds(const std::function<void()>& work) {
  const auto start = SteadyClock::now();
  work();
  return std::chrono::duration<double>(SteadyClock::now() - start).count();
}

struct Parts {
  std::vector<std::span<const float>> in;
  std::vector<std::span<float>> out;
  std::vector<std::span<std::uint8_t>> encoded;
};

Parts cut(std::span<const float> x, std::span<float> y, Bytes& buffer, std::size_t part, Codec codec) {
  Parts parts;
  std::size_t total = 0;
  for (std::size_t begin = 0; begin < x.size(); begin += part)
    total += encoded_bytes(codec, std::min(part, x.size() - begin));
  buffer.assign(total, 0);  // allocated and touched before any timing
  std::size_t offset = 0;
  for (std::size_t begin = 0; begin < x.size(); begin += part) {
    const std::size_t n = std::min(part, x.size() - begin), bytes = encoded_bytes(codec, n);
    parts.in.push_back(x.subspan(begin, n));
    parts.out.push_back(y.subspan(begin, n));
    parts.encoded.push_back(std::span<std::uint8_t>(buffer).subspan(offset, bytes));
    offset += bytes;
  }
  return parts;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Encode/decode throughput and error of the all-reduce part codecs"};
  std::size_t elements = std::size_t{16} << 20;
  int repeats = 5;
  std::size_t part_elements = 0;
  bool json = false;
  app.add_option("--elements", elements, "floats in the vector (default 16Mi)")->check(CLI::PositiveNumber);
  app.add_option("--repeats", repeats, "timed runs per codec; the median is reported")
      ->check(CLI::PositiveNumber);
  app.add_option("--part-elements", part_elements, "floats per part (0: the whole vector is one part)");
  app.add_flag("--json", json, "print a JSON array instead of a markdown table");
  CLI11_PARSE(app, argc, argv);
  const std::size_t part = part_elements == 0 ? elements : part_elements;

  std::vector<float> x(elements), y(elements, 0.0f);
  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (float& v : x) v = normal(rng);
  double scale = 0;
  for (float v : x) scale = std::max(scale, std::fabs(static_cast<double>(v)));
  const double gigabytes = static_cast<double>(elements) * sizeof(float) / 1e9;

  std::vector<Row> rows;
  Bytes buffer;
  for (Codec codec :
       {Codec::kNone, Codec::kFloat16, Codec::kScaledFloat16, Codec::kUniform8Bit, Codec::kBlockwise8Bit}) {
    Parts parts = cut(x, y, buffer, part, codec);
    Row row;
    row.codec = std::string(codec_name(codec));
    row.bytes_per_element = static_cast<double>(buffer.size()) / static_cast<double>(elements);
    for (detail::Kernels kernels : {detail::Kernels::kPortable, detail::Kernels::kNative}) {
      auto encode_all = [&] {
        for (std::size_t i = 0; i < parts.in.size(); ++i)
          detail::encode_with(kernels, codec, parts.in[i], parts.encoded[i]);
      };
      auto decode_all = [&] {
        for (std::size_t i = 0; i < parts.in.size(); ++i) {
          if (Status s = detail::decode_with(kernels, codec, parts.encoded[i], parts.out[i]); !s.is_ok()) {
            std::fprintf(stderr, "%s: decode failed: %s\n", row.codec.c_str(), s.to_string().c_str());
            std::exit(1);
          }
        }
      };
      encode_all();  // warm-up: page faults, caches, the F16C check
      decode_all();
      std::vector<double> encode_s, decode_s;
      for (int r = 0; r < repeats; ++r) {
        encode_s.push_back(seconds(encode_all));
        decode_s.push_back(seconds(decode_all));
      }
      const bool native = kernels == detail::Kernels::kNative;
      (native ? row.encode_gbps : row.portable_encode_gbps) = gigabytes / median(encode_s);
      (native ? row.decode_gbps : row.portable_decode_gbps) = gigabytes / median(decode_s);
    }
    double worst = 0, bound = 0;
    for (std::size_t i = 0; i < elements; ++i)
      worst = std::max(worst, std::fabs(static_cast<double>(x[i]) - static_cast<double>(y[i])));
    for (std::span<const float> in : parts.in) bound = std::max(bound, error_bound(codec, in));
    row.max_error = worst / scale;
    row.bound = bound / scale;
    rows.push_back(row);
  }

  if (json) {
    nlohmann::json out = nlohmann::json::array();
    for (const Row& r : rows)
      out.push_back({{"codec", r.codec},
                     {"elements", elements},
                     {"part_elements", part},
                     {"repeats", repeats},
                     {"bytes_per_element", r.bytes_per_element},
                     {"encode_gbps", r.encode_gbps},
                     {"decode_gbps", r.decode_gbps},
                     {"portable_encode_gbps", r.portable_encode_gbps},
                     {"portable_decode_gbps", r.portable_decode_gbps},
                     {"max_rel_error", r.max_error},
                     {"bound_rel", r.bound}});
    std::printf("%s\n", out.dump(2).c_str());
    return 0;
  }
  std::printf(
      "%zu normal(0,1) floats in parts of %zu, median of %d runs; GB/s of float32 input; errors "
      "relative to max abs(x) = %.3g; F16C %s\n\n",
      elements, part, repeats, scale, detail::cpu_has_f16c() ? "on" : "off");
  std::printf(
      "| codec | bytes/elem | encode GB/s | decode GB/s | portable encode | portable decode | "
      "max error / max abs(x) | bound / max abs(x) |\n");
  std::printf("|---|---:|---:|---:|---:|---:|---:|---:|\n");
  for (const Row& r : rows)
    std::printf("| %s | %.3f | %.2f | %.2f | %.2f | %.2f | %.2e | %.2e |\n", r.codec.c_str(),
                r.bytes_per_element, r.encode_gbps, r.decode_gbps, r.portable_encode_gbps,
                r.portable_decode_gbps, r.max_error, r.bound);
  return 0;
}
