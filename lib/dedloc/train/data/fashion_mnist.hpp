// Fashion-MNIST (Xiao et al. 2017) as Debian's `dataset-fashion-mnist` package ships it: four gzip'd IDX
// files under /usr/share/datasets/fashion-mnist, {train,t10k}-{images-idx3,labels-idx1}-ubyte.gz.
//
// Why this data set: the DeDLOC paper's vision experiment trains SwAV on ImageNet; on CPU we keep the method
// and shrink the data to 28x28 grayscale images of ten clothing classes (60,000 train, 10,000 test). Unlike
// MNIST it is not solved by a linear model on pixels, so a learned representation has something to show.
//
// IDX (LeCun's format): a big-endian 32-bit magic 0x000008TD, where T = 0x08 is the unsigned-byte element
// type and D the number of dimensions, then D big-endian 32-bit sizes, then the elements in row-major order.
// Images are D = 3 (count, rows, cols), labels D = 1 (count). The files are read whole and checked strictly:
// the magic, the sizes (the body must be exactly as long as they say), that both files of a split hold the
// same count and that every label is a class 0..9. A truncated, corrupt or hostile file is an error naming
// the file, never a crash; the decompressed size is capped so that a gzip bomb cannot exhaust memory.
//
// Torch-free: the images stay bytes here; the task turns them into tensors.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dedloc/core/status.hpp"

namespace dedloc::train::data {

inline constexpr const char* kFashionMnistDebianDir = "/usr/share/datasets/fashion-mnist";
inline constexpr int kFashionMnistClasses = 10;

struct FashionMnistOptions {
  std::string dir = kFashionMnistDebianDir;  // holds the four .gz files
  std::string split = "train";               // "train" (60,000 images) or "test" (the t10k files, 10,000)
  std::int64_t max_samples = 0;              // keep only the first N images; 0 = all of them
};

// One split in memory: `count` images of rows x cols bytes (0 = black background, 255 = white), row-major,
// image i at pixels[i * rows * cols], and its class in labels[i].
struct FashionMnist {
  std::int64_t count = 0;
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  std::vector<std::uint8_t> pixels;
  std::vector<std::uint8_t> labels;

  std::int64_t image_size() const { return rows * cols; }
  const std::uint8_t* image(std::int64_t i) const { return pixels.data() + i * image_size(); }
};

// Loads one split. Errors: kNotFound (a file is missing), kIo (unreadable, or not valid gzip: truncated,
// bad checksum), kMalformed (wrong magic, sizes that disagree with the body, a label outside 0..9, counts
// that differ between images and labels), kTooLarge (decompresses past the cap), kInvalidArgument (bad
// options). Every message names the file.
Result<FashionMnist> load_fashion_mnist(const FashionMnistOptions& options);

// The pieces, for tests and other IDX data sets. `source` names the bytes in errors.
// Decompresses a whole .gz file (a plain, uncompressed file is passed through as zlib does).
Result<std::vector<std::uint8_t>> read_gzip_file(const std::string& path, std::size_t max_bytes);

struct IdxImages {
  std::int64_t count = 0, rows = 0, cols = 0;
  std::vector<std::uint8_t> pixels;
};
Result<IdxImages> parse_idx_images(const std::vector<std::uint8_t>& bytes, const std::string& source);
Result<std::vector<std::uint8_t>> parse_idx_labels(const std::vector<std::uint8_t>& bytes, const std::string& source);

}  // namespace dedloc::train::data
