#include "dedloc/train/data/fashion_mnist.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <sys/stat.h>

#include <zlib.h>

namespace dedloc::train::data {
namespace {

// The four files of Fashion-MNIST decompress to 47 MB, 7.8 MB, 60 KB and 10 KB; anything far larger is not
// Fashion-MNIST (or is a gzip bomb).
constexpr std::size_t kMaxDecompressedBytes = 256u << 20;
// Dimensions a real image set never exceeds; keeps count * rows * cols far from overflowing.
constexpr std::uint32_t kMaxSide = 4096;
constexpr std::uint32_t kMaxCount = 100'000'000;

constexpr std::uint32_t kImagesMagic = 0x00000803;  // unsigned bytes, 3 dimensions
constexpr std::uint32_t kLabelsMagic = 0x00000801;  // unsigned bytes, 1 dimension

std::uint32_t big_endian_u32(const std::uint8_t* p) {
  return (std::uint32_t{p[0]} << 24) | (std::uint32_t{p[1]} << 16) | (std::uint32_t{p[2]} << 8) | std::uint32_t{p[3]};
}

std::string hex32(std::uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08x", v);
  return buf;
}

// Checks the header "magic, sizes[dims]" and returns the sizes.
Result<std::vector<std::uint32_t>> parse_idx_header(const std::vector<std::uint8_t>& bytes, std::uint32_t magic,
                                                    int dims, const std::string& source) {
  if (bytes.size() < 4) {
    return error(Code::kMalformed,
                 source + ": " + std::to_string(bytes.size()) + " bytes, too short for an IDX file");
  }
  const std::uint32_t got = big_endian_u32(bytes.data());
  if (got != magic) {
    return error(Code::kMalformed, source + ": IDX magic " + hex32(got) + ", expected " + hex32(magic) +
                                       " (unsigned bytes, " + std::to_string(dims) + " dimensions)");
  }
  const std::size_t header = 4 + 4 * static_cast<std::size_t>(dims);
  if (bytes.size() < header) {
    return error(Code::kMalformed, source + ": " + std::to_string(bytes.size()) +
                                       " bytes, shorter than its IDX header (" + std::to_string(header) + " bytes)");
  }
  std::vector<std::uint32_t> sizes;
  for (int d = 0; d < dims; ++d) sizes.push_back(big_endian_u32(bytes.data() + 4 + 4 * d));
  return sizes;
}

Status check_body(const std::vector<std::uint8_t>& bytes, std::size_t header, std::uint64_t elements,
                  const std::string& source) {
  const std::uint64_t expected = header + elements;
  if (bytes.size() != expected) {
    return error(Code::kMalformed, source + ": " + std::to_string(bytes.size()) + " bytes, but its header promises " +
                                       std::to_string(expected) + (bytes.size() < expected ? " (truncated)" : ""));
  }
  return Status::ok();
}

}  // namespace

Result<std::vector<std::uint8_t>> read_gzip_file(const std::string& path, std::size_t max_bytes) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    const int err = errno;
    return error(err == ENOENT ? Code::kNotFound : Code::kIo, path + ": " + std::strerror(err));
  }
  if (!S_ISREG(st.st_mode)) return error(Code::kIo, path + ": not a regular file");
  gzFile file = ::gzopen(path.c_str(), "rb");
  if (file == nullptr) return error(Code::kIo, path + ": cannot open: " + std::strerror(errno));

  std::vector<std::uint8_t> out;
  constexpr unsigned kChunk = 1u << 20;
  Status status;
  while (true) {
    if (out.size() > max_bytes) {
      status = error(Code::kTooLarge, path + ": decompresses to more than " + std::to_string(max_bytes) + " bytes");
      break;
    }
    const std::size_t old = out.size();
    out.resize(old + kChunk);
    const int n = ::gzread(file, out.data() + old, kChunk);
    if (n < 0) {
      int code = 0;
      const char* what = ::gzerror(file, &code);
      status = error(Code::kIo, path + ": not valid gzip: " + std::string(what ? what : "read error"));
      break;
    }
    out.resize(old + static_cast<std::size_t>(n));
    if (n == 0) {
      // End of input: zlib reports a stream that stopped early (a truncated file) as Z_BUF_ERROR here.
      int code = 0;
      const char* what = ::gzerror(file, &code);
      if (code != Z_OK) {
        status = error(Code::kIo, path + ": not valid gzip: " + std::string(what ? what : "read error") +
                                      (code == Z_BUF_ERROR ? " (truncated?)" : ""));
      }
      break;
    }
  }
  ::gzclose(file);
  if (!status) return status;
  if (out.size() > max_bytes) {
    return error(Code::kTooLarge, path + ": decompresses to more than " + std::to_string(max_bytes) + " bytes");
  }
  return out;
}

Result<IdxImages> parse_idx_images(const std::vector<std::uint8_t>& bytes, const std::string& source) {
  auto sizes = parse_idx_header(bytes, kImagesMagic, 3, source);
  if (!sizes) return sizes.status();
  const std::uint32_t count = (*sizes)[0], rows = (*sizes)[1], cols = (*sizes)[2];
  if (count > kMaxCount || rows == 0 || cols == 0 || rows > kMaxSide || cols > kMaxSide) {
    return error(Code::kMalformed, source + ": implausible image set " + std::to_string(count) + " x " +
                                       std::to_string(rows) + " x " + std::to_string(cols));
  }
  const std::uint64_t elements = std::uint64_t{count} * rows * cols;
  DEDLOC_RETURN_IF_ERROR(check_body(bytes, 16, elements, source));
  IdxImages images;
  images.count = count;
  images.rows = rows;
  images.cols = cols;
  images.pixels.assign(bytes.begin() + 16, bytes.end());
  return images;
}

Result<std::vector<std::uint8_t>> parse_idx_labels(const std::vector<std::uint8_t>& bytes, const std::string& source) {
  auto sizes = parse_idx_header(bytes, kLabelsMagic, 1, source);
  if (!sizes) return sizes.status();
  const std::uint32_t count = (*sizes)[0];
  if (count > kMaxCount) return error(Code::kMalformed, source + ": implausible label count " + std::to_string(count));
  DEDLOC_RETURN_IF_ERROR(check_body(bytes, 8, count, source));
  std::vector<std::uint8_t> labels(bytes.begin() + 8, bytes.end());
  for (std::size_t i = 0; i < labels.size(); ++i) {
    if (labels[i] >= kFashionMnistClasses) {
      return error(Code::kMalformed, source + ": label " + std::to_string(labels[i]) + " of sample " +
                                         std::to_string(i) + " is not a class 0.." +
                                         std::to_string(kFashionMnistClasses - 1));
    }
  }
  return labels;
}

Result<FashionMnist> load_fashion_mnist(const FashionMnistOptions& options) {
  std::string prefix;
  if (options.split == "train") {
    prefix = "train";
  } else if (options.split == "test" || options.split == "t10k") {
    prefix = "t10k";
  } else {
    return error(Code::kInvalidArgument, "fashion-mnist: split '" + options.split + "' must be 'train' or 'test'");
  }
  if (options.max_samples < 0) {
    return error(Code::kInvalidArgument, "fashion-mnist: max_samples must be >= 0 (0 = all)");
  }
  const std::string dir = options.dir.empty() ? std::string(kFashionMnistDebianDir) : options.dir;
  const std::string images_path = dir + "/" + prefix + "-images-idx3-ubyte.gz";
  const std::string labels_path = dir + "/" + prefix + "-labels-idx1-ubyte.gz";
  const std::string hint = " (Debian: apt-get install dataset-fashion-mnist)";

  auto image_bytes = read_gzip_file(images_path, kMaxDecompressedBytes);
  if (!image_bytes) {
    auto s = image_bytes.status();
    return s.code() == Code::kNotFound ? Status(s.code(), s.message() + hint) : s;
  }
  auto images = parse_idx_images(*image_bytes, images_path);
  if (!images) return images.status();
  image_bytes->clear();
  image_bytes->shrink_to_fit();

  auto label_bytes = read_gzip_file(labels_path, kMaxDecompressedBytes);
  if (!label_bytes) {
    auto s = label_bytes.status();
    return s.code() == Code::kNotFound ? Status(s.code(), s.message() + hint) : s;
  }
  auto labels = parse_idx_labels(*label_bytes, labels_path);
  if (!labels) return labels.status();
  if (static_cast<std::int64_t>(labels->size()) != images->count) {
    return error(Code::kMalformed, labels_path + ": " + std::to_string(labels->size()) + " labels for " +
                                       std::to_string(images->count) + " images in " + images_path);
  }
  if (images->count == 0) return error(Code::kMalformed, images_path + ": holds no images");

  FashionMnist set;
  set.count = images->count;
  set.rows = images->rows;
  set.cols = images->cols;
  set.pixels = std::move(images->pixels);
  set.labels = std::move(*labels);
  if (options.max_samples > 0 && options.max_samples < set.count) {
    set.count = options.max_samples;
    set.pixels.resize(static_cast<std::size_t>(set.count * set.image_size()));
    set.labels.resize(static_cast<std::size_t>(set.count));
    set.pixels.shrink_to_fit();
    set.labels.shrink_to_fit();
  }
  return set;
}

}  // namespace dedloc::train::data
