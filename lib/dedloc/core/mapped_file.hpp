// A file mapped read-only into memory: datasets larger than RAM are read through the page cache, and only
// the pages a batch touches are ever loaded.
#pragma once

#include <string>

#include "dedloc/core/bytes.hpp"
#include "dedloc/core/status.hpp"

namespace dedloc {

class MappedFile {
 public:
  // kNotFound for a missing file, kIo (naming the file and the reason) when it cannot be opened or mapped.
  static Result<MappedFile> open(const std::string& path);

  MappedFile() = default;  // maps nothing: bytes() is empty
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  ByteSpan bytes() const { return {data_, size_}; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  const std::uint8_t* data_ = nullptr;  // null for an empty file (mmap refuses length 0)
  std::size_t size_ = 0;
};

}  // namespace dedloc
