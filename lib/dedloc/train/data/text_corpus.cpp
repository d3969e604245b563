#include "dedloc/train/data/text_corpus.hpp"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <string_view>
#include <system_error>

#include "dedloc/core/files.hpp"

namespace dedloc::train {
namespace {

namespace fs = std::filesystem;

constexpr size_t kMaxFileBytes = size_t{1} << 30;
constexpr size_t kBinaryProbeBytes = 4096;

bool is_space(char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; }

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

// Appends `line` to `out` with every run of whitespace turned into one space.
void append_collapsed(std::string& out, std::string_view line) {
  for (char c : line) {
    if (is_space(c)) {
      if (!out.empty() && out.back() != ' ') out.push_back(' ');
    } else {
      out.push_back(c);
    }
  }
}

std::vector<std::string_view> split_lines(std::string_view text) {
  std::vector<std::string_view> lines;
  while (!text.empty()) {
    size_t end = text.find('\n');
    std::string_view line = text.substr(0, end);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    lines.push_back(line);
    if (end == std::string_view::npos) break;
    text.remove_prefix(end + 1);
  }
  return lines;
}

bool is_fortune_separator(std::string_view line) { return trim(line) == "%"; }

// One document from its lines: paragraphs (blank lines, attributions) joined, then split into sentences.
Document make_document(const std::vector<std::string_view>& lines) {
  Document document;
  std::string paragraph;
  auto flush = [&] {
    for (auto& sentence : split_sentences(paragraph)) document.sentences.push_back(std::move(sentence));
    paragraph.clear();
  };
  for (std::string_view raw : lines) {
    std::string_view line = trim(raw);
    if (line.empty() || line.starts_with("--")) flush();
    if (!paragraph.empty()) paragraph.push_back(' ');
    append_collapsed(paragraph, line);
  }
  flush();
  return document;
}

bool looks_binary(const std::string& text) {
  return text.find('\0', 0) < std::min(text.size(), kBinaryProbeBytes);
}

bool skipped_in_directory(const fs::path& path) {
  std::string name = path.filename().string();
  return name.starts_with(".") || name.ends_with(".dat") || name.ends_with(".u8");
}

// The files a path stands for: itself, or a directory's eligible files in name order.
Result<std::vector<std::string>> files_of(const std::string& path) {
  std::error_code ec;
  fs::file_status status = fs::status(path, ec);
  if (status.type() == fs::file_type::not_found) {
    return error(Code::kNotFound, "text corpus path " + path + " does not exist");
  }
  if (ec) return error(Code::kIo, "cannot stat text corpus path " + path + ": " + ec.message());
  if (!fs::is_directory(status)) return std::vector<std::string>{path};

  std::vector<std::string> files;
  fs::directory_iterator it(path, ec);
  if (ec) return error(Code::kIo, "cannot list text corpus directory " + path + ": " + ec.message());
  for (const fs::directory_entry& entry : it) {
    std::error_code entry_ec;
    if (entry.is_symlink(entry_ec) || !entry.is_regular_file(entry_ec)) continue;
    if (skipped_in_directory(entry.path())) continue;
    files.push_back(entry.path().string());
  }
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace

std::vector<std::string> split_sentences(const std::string& paragraph) {
  std::vector<std::string> sentences;
  std::string_view rest = trim(paragraph);
  auto is_end = [](char c) { return c == '.' || c == '!' || c == '?'; };
  auto is_closer = [](char c) { return c == '"' || c == '\'' || c == ')' || c == ']'; };
  size_t start = 0;
  size_t i = 0;
  while (i < rest.size()) {
    if (!is_end(rest[i])) {
      ++i;
      continue;
    }
    size_t end = i;
    while (end < rest.size() && is_end(rest[end])) ++end;
    while (end < rest.size() && is_closer(rest[end])) ++end;
    // A boundary: terminal punctuation, a space, then anything but a lowercase letter ("e.g. this" stays).
    if (end + 1 < rest.size() && rest[end] == ' ' &&
        !std::islower(static_cast<unsigned char>(rest[end + 1]))) {
      std::string_view sentence = trim(rest.substr(start, end - start));
      if (!sentence.empty()) sentences.emplace_back(sentence);
      start = end + 1;
    }
    i = end;
  }
  std::string_view last = trim(rest.substr(std::min(start, rest.size())));
  if (!last.empty()) sentences.emplace_back(last);
  return sentences;
}

std::vector<Document> split_documents(const std::string& text, bool fortune_format) {
  std::vector<Document> documents;
  std::vector<std::string_view> lines;
  auto flush = [&] {
    Document document = make_document(lines);
    if (!document.sentences.empty()) documents.push_back(std::move(document));
    lines.clear();
  };
  for (std::string_view line : split_lines(text)) {
    bool boundary = fortune_format ? is_fortune_separator(line) : trim(line).empty();
    if (boundary) {
      flush();
    } else {
      lines.push_back(line);
    }
  }
  flush();
  return documents;
}

Result<TextCorpus> read_text_corpus(const TextCorpusOptions& options) {
  if (options.paths.empty()) return error(Code::kInvalidArgument, "the text corpus names no paths");
  TextCorpus corpus;
  auto full = [&] {
    return options.max_documents > 0 && static_cast<std::int64_t>(corpus.documents.size()) >= options.max_documents;
  };
  for (const std::string& path : options.paths) {
    if (full()) break;
    auto files = files_of(path);
    if (!files) return files.status();
    size_t documents_before = corpus.documents.size();
    for (const std::string& file : *files) {
      if (full()) break;
      auto text = read_file(file, kMaxFileBytes);
      if (!text) return text.status().with_context("reading the text corpus");
      if (looks_binary(*text)) {
        if (file == path) return error(Code::kInvalidArgument, "text corpus file " + file + " holds binary data");
        continue;
      }
      bool fortune_format = false;
      for (std::string_view line : split_lines(*text)) {
        if (is_fortune_separator(line)) {
          fortune_format = true;
          break;
        }
      }
      std::vector<Document> documents = split_documents(*text, fortune_format);
      corpus.files.push_back(file);
      corpus.bytes += text->size();
      for (auto& document : documents) {
        if (full()) break;
        corpus.documents.push_back(std::move(document));
      }
    }
    if (corpus.documents.size() == documents_before) {
      std::string why = files->empty() ? "no readable text files: *.dat, *.u8, hidden files, symlinks and "
                                         "subdirectories are skipped"
                                       : std::to_string(files->size()) + " files, none with text";
      return error(Code::kNotFound, "no text in " + path + " (" + why + ")");
    }
  }
  return corpus;
}

}  // namespace dedloc::train
