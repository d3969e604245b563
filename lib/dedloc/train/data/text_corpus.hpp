// Plain English text for the language-model recipe (docs/recipes.md), read from files a recipe names.
//
// The default corpus is Debian's `fortunes` package: real, varied English (quotes, jokes, poems) that any
// peer can install, so every peer of a run reads the very same documents without downloading anything.
// One fortune is one document; ALBERT's sentence-order task needs documents split into sentences.
//
// Two file formats, told apart by their content:
//   fortune files   documents separated by lines holding only "%" (the strfile source format)
//   other text      documents separated by blank lines
// Inside a document, hard-wrapped lines are joined and the text is split into sentences after ".", "!" or
// "?" followed by a space; a line starting with "--" (a fortune's attribution) starts a sentence of its own.
//
// A directory contributes its regular files in name order, not recursively (so the fortunes' "off/"
// directory is left out), skipping symlinks, hidden files, the strfile indexes (*.dat, *.u8) and any file
// with a NUL byte in its first 4 KiB (binary data). Reading is deterministic: the same paths give the same
// documents in the same order on every peer.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dedloc/core/status.hpp"

namespace dedloc::train {

// Where Debian's `fortunes` package installs its files.
inline constexpr const char* kFortunesDir = "/usr/share/games/fortunes";

struct Document {
  std::vector<std::string> sentences;  // each non-empty, whitespace collapsed to single spaces
};

struct TextCorpusOptions {
  std::vector<std::string> paths = {kFortunesDir};  // files and directories, read in this order
  std::int64_t max_documents = 0;                   // stop after this many documents; 0: no limit
};

struct TextCorpus {
  std::vector<Document> documents;
  std::vector<std::string> files;  // the files read, in reading order
  std::uint64_t bytes = 0;         // their total size
};

// Reads every path. Errors: kNotFound for a path that does not exist or a path (file or directory) that
// yields no document, kIo for a file that cannot be read, kInvalidArgument for an empty path list.
Result<TextCorpus> read_text_corpus(const TextCorpusOptions& options);

// The documents of one file's text (exposed for tests). `fortune_format`: split at "%" lines.
std::vector<Document> split_documents(const std::string& text, bool fortune_format);

// Splits one paragraph (already joined into one line) into sentences.
std::vector<std::string> split_sentences(const std::string& paragraph);

}  // namespace dedloc::train
