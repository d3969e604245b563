// A corpus as token ids, cached on disk, and how a training process gets one without linking SentencePiece.
//
// Why a separate process: Debian's libsentencepiece carries its own copy of protobuf-lite and exports its
// symbols. In a process that also loads libtorch (and with it libprotobuf), libprotobuf's initializers bind
// to SentencePiece's copy and the process crashes before main(). So the tokenizer (tokenizer.hpp) runs only
// in `dedloc-tokenize`, a small tool without torch, and hands the training process a token file: the ids of
// every sentence of every document, plus the vocabulary's pieces for rendering ids in logs and tests.
//
// load_tokenized_corpus() reads the corpus itself (cheap) to key the cache on its contents, then reads the
// token file for that key from the work directory, and only when there is none runs dedloc-tokenize to
// write it. The key hashes every sentence and the requested vocabulary size, so a changed corpus never
// picks up stale ids.
//
// Token file (little-endian): "DLTOKENS", u32 version (1), u64 key, u32 piece count, each piece as
// u32 length + bytes, u64 document count, each document as u32 sentence count, each sentence as
// u32 token count + that many i32 ids. Written atomically.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dedloc/core/clock.hpp"
#include "dedloc/core/log.hpp"
#include "dedloc/core/status.hpp"
#include "dedloc/train/data/text_corpus.hpp"

namespace dedloc::train {

using TokenIds = std::vector<std::int32_t>;

// The special tokens' fixed ids, whatever the corpus (tokenizer.hpp trains them in). Ordinary pieces
// start at kFirstPiece.
struct SpecialTokens {
  static constexpr int kPad = 0;    // [PAD]
  static constexpr int kUnk = 1;    // <unk>
  static constexpr int kCls = 2;    // [CLS]
  static constexpr int kSep = 3;    // [SEP]
  static constexpr int kMask = 4;   // [MASK]
  static constexpr int kFirstPiece = 5;
};

struct TokenizedCorpus {
  std::uint64_t key = 0;                           // corpus_key() of the text it was made from
  std::vector<std::string> pieces;                 // piece of each id (SentencePiece's "▁" marks a space)
  std::vector<std::vector<TokenIds>> documents;    // document -> sentence -> ids

  std::int64_t vocab_size() const { return static_cast<std::int64_t>(pieces.size()); }
  std::int64_t token_count() const;
  // The text of `ids` as SentencePiece would decode it for plain ASCII: pieces joined, "▁" as a space, no
  // leading space; ids below 5 (the special tokens) print as their pieces in brackets (e.g. "[MASK]").
  std::string render(const std::vector<std::int64_t>& ids) const;
};

// The cache key of a corpus and a requested vocabulary size (FNV-1a over every sentence; stable across
// platforms and library versions, unlike std::hash).
std::uint64_t corpus_key(const std::vector<Document>& documents, int vocab_size);
// "albert-tokens-8000-0123456789abcdef.bin" and "albert-spm-8000-0123456789abcdef.model".
std::string token_file_name(std::uint64_t key, int vocab_size);
std::string tokenizer_model_file_name(std::uint64_t key, int vocab_size);

Status write_token_corpus(const std::string& path, const TokenizedCorpus& corpus);
// kNotFound / kIo for a file that cannot be read, kMalformed for one that does not decode.
Result<TokenizedCorpus> read_token_corpus(const std::string& path);

struct TokenizeOptions {
  TextCorpusOptions corpus;
  int vocab_size = 8000;
  std::string work_dir;                              // the cache; "" uses a temporary directory
  std::string tool;                                  // dedloc-tokenize; "" finds it (find_tokenize_tool)
  Duration timeout = std::chrono::minutes(30);       // for dedloc-tokenize
};

// Where dedloc-tokenize is: $DEDLOC_TOKENIZE, else beside the running executable, else where this build
// tree puts it, else "dedloc-tokenize" (looked up in PATH).
std::string find_tokenize_tool();

// The corpus as token ids, from the cache or from dedloc-tokenize (see above). Errors: those of
// read_text_corpus(); kUnavailable when dedloc-tokenize cannot be run or fails (its stderr in the
// message); kTimeout; kMalformed for a token file that is not the one asked for.
Result<TokenizedCorpus> load_tokenized_corpus(const TokenizeOptions& options, Logger* log = &Logger::global());

}  // namespace dedloc::train
