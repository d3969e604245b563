#include "dedloc/core/files.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

namespace dedloc {

namespace {

Status io_error(const std::string& what, const std::string& path) {
  return error(Code::kIo, what + " " + path + ": " + std::strerror(errno));
}

std::string directory_of(const std::string& path) {
  auto slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

void fsync_directory(const std::string& path) {
  int dir = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir >= 0) {
    ::fsync(dir);
    ::close(dir);
  }
}

}  // namespace

Status write_file_atomically(const std::string& path, std::string_view contents, mode_t mode) {
  std::random_device entropy;
  std::string tmp = path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(entropy());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
  if (fd < 0) return io_error("cannot create", tmp);
  const char* data = contents.data();
  size_t left = contents.size();
  while (left > 0) {
    ssize_t n = ::write(fd, data, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      Status st = io_error("cannot write", tmp);
      ::close(fd);
      ::unlink(tmp.c_str());
      return st;
    }
    data += n;
    left -= static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    Status st = io_error("cannot flush", tmp);
    ::unlink(tmp.c_str());
    return st;
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    Status st = io_error("cannot rename into", path);
    ::unlink(tmp.c_str());
    return st;
  }
  // Make the rename itself durable.
  fsync_directory(directory_of(path));
  return Status::ok();
}

Status replace_directory(const std::string& staged, const std::string& dir) {
  namespace fs = std::filesystem;
  fsync_directory(staged);
  if (::rename(staged.c_str(), dir.c_str()) == 0) {
    fsync_directory(directory_of(dir));
    return Status::ok();
  }
  if (errno != EEXIST && errno != ENOTEMPTY) return io_error("cannot rename " + staged + " to", dir);
  std::error_code ec;
  if (::renameat2(AT_FDCWD, staged.c_str(), AT_FDCWD, dir.c_str(), RENAME_EXCHANGE) == 0) {
    fsync_directory(directory_of(dir));
    fs::remove_all(staged, ec);  // now the old folder
    return Status::ok();
  }
  if (errno != EINVAL && errno != ENOSYS) return io_error("cannot exchange " + staged + " with", dir);
  const std::string aside = staged + ".old";
  if (::rename(dir.c_str(), aside.c_str()) != 0) return io_error("cannot move aside", dir);
  if (::rename(staged.c_str(), dir.c_str()) != 0) {
    Status st = io_error("cannot rename " + staged + " to", dir);
    ::rename(aside.c_str(), dir.c_str());  // put the old one back
    return st;
  }
  fsync_directory(directory_of(dir));
  fs::remove_all(aside, ec);
  return Status::ok();
}

Result<std::string> read_file(const std::string& path, size_t max_bytes) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return error(errno == ENOENT ? Code::kNotFound : Code::kIo, "cannot open " + path + ": " + std::strerror(errno));
  in.seekg(0, std::ios::end);
  auto size = in.tellg();
  if (size < 0) return error(Code::kIo, "cannot read " + path);
  if (static_cast<size_t>(size) > max_bytes) {
    return error(Code::kTooLarge, path + " is " + std::to_string(size) + " bytes, over the limit of " +
                                      std::to_string(max_bytes));
  }
  std::string out(static_cast<size_t>(size), '\0');
  in.seekg(0);
  in.read(out.data(), size);
  if (!in) return error(Code::kIo, "cannot read " + path);
  return out;
}

std::string path_beside(const std::string& config_file, const std::string& path) {
  if (path.empty() || std::filesystem::path(path).is_absolute()) return path;
  return (std::filesystem::path(config_file).parent_path() / path).lexically_normal().string();
}

}  // namespace dedloc
