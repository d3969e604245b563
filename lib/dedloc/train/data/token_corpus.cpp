#include "dedloc/train/data/token_corpus.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string_view>
#include <system_error>

#include "dedloc/core/files.hpp"

extern char** environ;

namespace dedloc::train {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kMagic = "DLTOKENS";
constexpr std::uint32_t kVersion = 1;
constexpr size_t kMaxTokenFileBytes = size_t{4} << 30;
constexpr size_t kStderrTailBytes = 4096;
constexpr std::string_view kSpaceMark = "\xe2\x96\x81";  // U+2581, SentencePiece's word boundary

void put_u32(std::string& out, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
void put_u64(std::string& out, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

// Bounds-checked little-endian reads; the first failure sticks.
class Reader {
 public:
  explicit Reader(std::string_view data) : data_(data) {}
  bool ok() const { return ok_; }
  size_t left() const { return data_.size() - at_; }
  std::uint64_t fixed(int bytes) {
    if (!ok_ || left() < static_cast<size_t>(bytes)) return fail();
    std::uint64_t v = 0;
    for (int i = 0; i < bytes; ++i) v |= std::uint64_t{static_cast<unsigned char>(data_[at_ + i])} << (8 * i);
    at_ += static_cast<size_t>(bytes);
    return v;
  }
  std::uint32_t u32() { return static_cast<std::uint32_t>(fixed(4)); }
  std::uint64_t u64() { return fixed(8); }
  std::string_view bytes(size_t n) {
    if (!ok_ || left() < n) return fail(), std::string_view();
    auto out = data_.substr(at_, n);
    at_ += n;
    return out;
  }
  // A count of items that take at least `min_bytes` each: refused when the rest of the file cannot hold them.
  std::uint64_t count(std::uint64_t value, size_t min_bytes) {
    if (ok_ && value > left() / min_bytes) fail();
    return ok_ ? value : 0;
  }

 private:
  std::uint64_t fail() {
    ok_ = false;
    return 0;
  }
  std::string_view data_;
  size_t at_ = 0;
  bool ok_ = true;
};

std::string hex16(std::uint64_t v) {
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(v));
  return text;
}

bool executable(const std::string& path) { return !path.empty() && ::access(path.c_str(), X_OK) == 0; }

// Runs `args` (args[0] looked up in PATH when it has no slash) with stdout on /dev/null, collecting stderr.
// Returns stderr on exit status 0.
Result<std::string> run_tool(const std::vector<std::string>& args, Duration timeout) {
  std::string line;
  for (const auto& a : args) line += (line.empty() ? "" : " ") + a;
  int err[2];
  if (::pipe2(err, O_CLOEXEC) != 0) return error(Code::kIo, std::string("pipe: ") + std::strerror(errno));
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, err[1], 2);
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid = -1;
  int rc = ::posix_spawnp(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(err[1]);
  if (rc != 0) {
    ::close(err[0]);
    return error(Code::kUnavailable, "cannot run " + args[0] + ": " + std::strerror(rc) +
                                         " (build dedloc-tokenize, or point DEDLOC_TOKENIZE at it)");
  }

  const Deadline deadline = Deadline::after(timeout);
  std::string output;
  bool timed_out = false;
  while (true) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline.remaining()).count();
    if (left <= 0) {
      timed_out = true;
      break;
    }
    pollfd fd{err[0], POLLIN, 0};
    int ready = ::poll(&fd, 1, static_cast<int>(std::min<long long>(left, 1000)));
    if (ready < 0 && errno == EINTR) continue;
    if (ready < 0) break;
    if (ready == 0) continue;
    char buffer[4096];
    ssize_t n = ::read(err[0], buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // EOF: the tool exited (or closed stderr)
    output.append(buffer, static_cast<size_t>(n));
    if (output.size() > 16 * kStderrTailBytes) output.erase(0, output.size() - kStderrTailBytes);
  }
  ::close(err[0]);
  // Stderr closed: the tool has exited or is about to; still, the wait has the same deadline.
  int status = 0;
  while (!timed_out) {
    pid_t got = ::waitpid(pid, &status, WNOHANG);
    if (got == pid) break;
    if (got < 0 && errno != EINTR) return error(Code::kInternal, std::string("waitpid: ") + std::strerror(errno));
    if (deadline.passed()) timed_out = true;
    if (!timed_out) ::usleep(5000);
  }
  if (timed_out) {
    ::kill(pid, SIGKILL);
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    return error(Code::kTimeout, "'" + line + "' did not finish within " +
                                     std::to_string(std::chrono::duration_cast<std::chrono::seconds>(timeout).count()) +
                                     " s");
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return output;
  std::string how = WIFEXITED(status) ? "exit status " + std::to_string(WEXITSTATUS(status))
                                      : "signal " + std::to_string(WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  if (output.size() > kStderrTailBytes) output.erase(0, output.size() - kStderrTailBytes);
  while (!output.empty() && (output.back() == '\n' || output.back() == ' ')) output.pop_back();
  return error(Code::kUnavailable, "'" + line + "' failed (" + how + "): " + output);
}

// A directory of its own under $TMPDIR, removed when this goes out of scope.
class TemporaryDirectory {
 public:
  static Result<TemporaryDirectory> make() {
    std::error_code ec;
    std::string pattern = (fs::temp_directory_path(ec) / "dedloc-tokens-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) {
      return error(Code::kIo, "cannot create a temporary directory " + pattern + ": " + std::strerror(errno));
    }
    return TemporaryDirectory(pattern);
  }
  TemporaryDirectory(TemporaryDirectory&& other) noexcept : path_(std::move(other.path_)) { other.path_.clear(); }
  TemporaryDirectory& operator=(TemporaryDirectory&&) = delete;
  ~TemporaryDirectory() {
    std::error_code ec;
    if (!path_.empty()) fs::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  explicit TemporaryDirectory(std::string path) : path_(std::move(path)) {}
  std::string path_;
};

}  // namespace

std::int64_t TokenizedCorpus::token_count() const {
  std::int64_t total = 0;
  for (const auto& document : documents) {
    for (const auto& sentence : document) total += static_cast<std::int64_t>(sentence.size());
  }
  return total;
}

std::string TokenizedCorpus::render(const std::vector<std::int64_t>& ids) const {
  std::string text;
  for (std::int64_t id : ids) {
    if (id < 0 || id >= vocab_size()) {
      text += "<?>";
      continue;
    }
    std::string_view piece = pieces[static_cast<size_t>(id)];
    while (!piece.empty()) {
      if (piece.starts_with(kSpaceMark)) {
        text.push_back(' ');
        piece.remove_prefix(kSpaceMark.size());
      } else {
        text.push_back(piece.front());
        piece.remove_prefix(1);
      }
    }
  }
  if (!text.empty() && text.front() == ' ') text.erase(0, 1);
  return text;
}

std::uint64_t corpus_key(const std::vector<Document>& documents, int vocab_size) {
  std::uint64_t hash = 0xcbf29ce484222325ull;  // FNV-1a, 64 bits
  auto add = [&](std::string_view bytes) {
    for (char c : bytes) {
      hash ^= static_cast<unsigned char>(c);
      hash *= 0x100000001b3ull;
    }
  };
  add("dedloc-spm-unigram-1 vocab ");  // bump when the tokenizer's settings change
  add(std::to_string(vocab_size));
  for (const Document& document : documents) {
    for (const std::string& sentence : document.sentences) {
      add(sentence);
      add("\n");
    }
    add("\x1e");
  }
  return hash;
}

std::string token_file_name(std::uint64_t key, int vocab_size) {
  return "albert-tokens-" + std::to_string(vocab_size) + "-" + hex16(key) + ".bin";
}

std::string tokenizer_model_file_name(std::uint64_t key, int vocab_size) {
  return "albert-spm-" + std::to_string(vocab_size) + "-" + hex16(key) + ".model";
}

Status write_token_corpus(const std::string& path, const TokenizedCorpus& corpus) {
  std::string out;
  out.reserve(64 + static_cast<size_t>(corpus.token_count()) * 4 + corpus.pieces.size() * 12);
  out.append(kMagic);
  put_u32(out, kVersion);
  put_u64(out, corpus.key);
  put_u32(out, static_cast<std::uint32_t>(corpus.pieces.size()));
  for (const auto& piece : corpus.pieces) {
    put_u32(out, static_cast<std::uint32_t>(piece.size()));
    out.append(piece);
  }
  put_u64(out, corpus.documents.size());
  for (const auto& document : corpus.documents) {
    put_u32(out, static_cast<std::uint32_t>(document.size()));
    for (const auto& sentence : document) {
      put_u32(out, static_cast<std::uint32_t>(sentence.size()));
      for (std::int32_t id : sentence) put_u32(out, static_cast<std::uint32_t>(id));
    }
  }
  return write_file_atomically(path, out);
}

Result<TokenizedCorpus> read_token_corpus(const std::string& path) {
  auto data = read_file(path, kMaxTokenFileBytes);
  if (!data) return data.status();
  auto malformed = [&](const std::string& what) { return error(Code::kMalformed, path + ": " + what); };
  Reader in(*data);
  if (in.bytes(kMagic.size()) != kMagic) return malformed("not a dedloc token file");
  if (std::uint32_t version = in.u32(); version != kVersion) {
    return malformed("token file version " + std::to_string(version) + ", expected " + std::to_string(kVersion));
  }
  TokenizedCorpus corpus;
  corpus.key = in.u64();
  auto pieces = in.count(in.u32(), 4);
  corpus.pieces.reserve(pieces);
  for (std::uint64_t i = 0; i < pieces && in.ok(); ++i) corpus.pieces.emplace_back(in.bytes(in.u32()));
  auto documents = in.count(in.u64(), 4);
  corpus.documents.resize(documents);
  for (auto& document : corpus.documents) {
    document.resize(in.count(in.u32(), 4));
    for (auto& sentence : document) {
      sentence.resize(in.count(in.u32(), 4));
      for (auto& id : sentence) {
        id = static_cast<std::int32_t>(in.u32());
        if (id < 0 || id >= static_cast<std::int64_t>(pieces)) return malformed("token id out of the vocabulary");
      }
    }
  }
  if (!in.ok()) return malformed("truncated token file");
  if (in.left() != 0) return malformed(std::to_string(in.left()) + " bytes after the last document");
  return corpus;
}

std::string find_tokenize_tool() {
  if (const char* env = std::getenv("DEDLOC_TOKENIZE"); env != nullptr && *env != '\0') return env;
  char self[PATH_MAX];
  ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
  if (n > 0) {
    fs::path exe(std::string(self, static_cast<size_t>(n)));
    std::string beside = (exe.parent_path() / "dedloc-tokenize").string();
    if (executable(beside)) return beside;
  }
#ifdef DEDLOC_TOKENIZE_BUILD_PATH
  if (executable(DEDLOC_TOKENIZE_BUILD_PATH)) return DEDLOC_TOKENIZE_BUILD_PATH;
#endif
  return "dedloc-tokenize";
}

Result<TokenizedCorpus> load_tokenized_corpus(const TokenizeOptions& options, Logger* log) {
  auto text = read_text_corpus(options.corpus);
  if (!text) return text.status();
  const std::uint64_t key = corpus_key(text->documents, options.vocab_size);

  std::optional<TemporaryDirectory> temporary;
  std::string dir = options.work_dir;
  if (dir.empty()) {
    auto made = TemporaryDirectory::make();
    if (!made) return made.status();
    temporary.emplace(std::move(*made));
    dir = temporary->path();
  } else {
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec) return error(Code::kIo, "cannot create the work directory " + dir + ": " + ec.message());
  }
  const std::string path = (fs::path(dir) / token_file_name(key, options.vocab_size)).string();
  auto matches = [&](const TokenizedCorpus& corpus) {
    return corpus.key == key && corpus.documents.size() == text->documents.size();
  };

  std::error_code ec;
  if (fs::exists(path, ec)) {
    auto cached = read_token_corpus(path);
    if (cached && matches(*cached)) return cached;
    log->warn("tokens") << "remaking " << path << ": "
                        << (cached ? std::string("it belongs to another corpus") : cached.status().to_string());
  }

  std::vector<std::string> args = {options.tool.empty() ? find_tokenize_tool() : options.tool,
                                   "--vocab-size", std::to_string(options.vocab_size),
                                   "--work-dir", dir,
                                   "--out", path,
                                   "--max-documents", std::to_string(options.corpus.max_documents),
                                   "--"};
  args.insert(args.end(), options.corpus.paths.begin(), options.corpus.paths.end());
  log->info("tokens") << "tokenizing " << text->documents.size() << " documents with " << args[0];
  auto output = run_tool(args, options.timeout);
  if (!output) return output.status();
  if (!output->empty()) log->debug("tokens") << args[0] << " said: " << *output;
  auto made = read_token_corpus(path);
  if (!made) return made.status().with_context("reading what dedloc-tokenize wrote");
  if (!matches(*made)) {
    return error(Code::kMalformed, path + " from " + args[0] + " does not match the corpus (another dedloc version?)");
  }
  return made;
}

}  // namespace dedloc::train
