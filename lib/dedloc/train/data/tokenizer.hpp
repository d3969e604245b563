// A SentencePiece unigram tokenizer (the tokenizer ALBERT uses), trained on the run's own corpus.
//
// Only dedloc-tokenize links this (library dedloc_tokenizer): SentencePiece's bundled protobuf cannot share
// a process with libtorch; training processes get token ids through token_corpus.hpp instead.
//
// Every peer trains it from the same documents with the same settings; SentencePiece's trainer is
// deterministic, so peers agree on the vocabulary without shipping a model file around. Training takes a
// few seconds on the fortunes corpus, so the model is cached in the task's work directory under a name that
// hashes the corpus and the settings (a different corpus never picks up a stale vocabulary), written
// atomically so that concurrent peers on one machine never read a half-written file
// (tokenizer_model_file_name() in token_corpus.hpp).
//
// Special tokens have fixed ids, whatever the corpus:
//   0 [PAD]   padding (SentencePiece's pad piece)
//   1 <unk>   unknown characters
//   2 [CLS]   3 [SEP]   4 [MASK]   control symbols: never produced by encode(), so text that spells
//                                   "[MASK]" is tokenized as ordinary characters
// Ordinary pieces start at id 5. There is no BOS/EOS: the task adds [CLS]/[SEP] itself.
//
// Thread-safety: encode() and decode() are const and may be called from several threads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "dedloc/core/log.hpp"
#include "dedloc/core/status.hpp"
#include "dedloc/train/data/text_corpus.hpp"
#include "dedloc/train/data/token_corpus.hpp"

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace dedloc::train {

struct TokenizerOptions {
  int vocab_size = 8000;   // requested pieces, specials included; a small corpus may yield fewer (soft limit)
  std::string cache_dir;   // where the model file is cached; "" trains in memory every time
  int num_threads = 2;     // trainer threads (the result does not depend on it)
};

class Tokenizer {
 public:
  static constexpr int kPadId = SpecialTokens::kPad;
  static constexpr int kUnkId = SpecialTokens::kUnk;
  static constexpr int kClsId = SpecialTokens::kCls;
  static constexpr int kSepId = SpecialTokens::kSep;
  static constexpr int kMaskId = SpecialTokens::kMask;
  static constexpr int kFirstPieceId = SpecialTokens::kFirstPiece;  // the first ordinary piece

  // Loads the cached model for this corpus and these options, or trains one and caches it.
  // Errors: kInvalidArgument (vocab_size < 16, empty corpus), kInternal (SentencePiece refuses the
  // corpus), kIo (the cache directory cannot be created or written).
  static Result<Tokenizer> train_or_load(const std::vector<Document>& documents, const TokenizerOptions& options,
                                         Logger* log = &Logger::global());
  // A model from SentencePiece's serialized ModelProto (a .model file's contents). kMalformed when it does
  // not parse or its special tokens are not at the fixed ids.
  static Result<Tokenizer> from_model(std::string serialized);

  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

  // Ids of ordinary pieces (never special ids other than <unk>). kInternal only on a SentencePiece failure.
  Result<std::vector<int>> encode(std::string_view text) const;
  // The text of `ids`; special ids decode to nothing. kInvalidArgument for an id outside the vocabulary.
  Result<std::string> decode(const std::vector<int>& ids) const;

  int vocab_size() const;
  // The piece of every id, in id order.
  std::vector<std::string> pieces() const;
  // The serialized model (what the cache file holds).
  const std::string& model() const { return model_; }
  // The cache file this tokenizer was loaded from or written to ("" when not cached).
  const std::string& cache_path() const { return cache_path_; }
  bool loaded_from_cache() const { return loaded_from_cache_; }

 private:
  Tokenizer();

  std::unique_ptr<sentencepiece::SentencePieceProcessor> processor_;
  std::string model_;
  std::string cache_path_;
  bool loaded_from_cache_ = false;
};

// Every sentence of `documents` as ids, keyed with corpus_key(documents, requested_vocab_size): the vocabulary
// size the recipe asked for, which a small corpus may not reach (Tokenizer::vocab_size() is the real one).
Result<TokenizedCorpus> tokenize_documents(const Tokenizer& tokenizer, const std::vector<Document>& documents,
                                           int requested_vocab_size);

struct TokenizeReport {
  std::string out;
  int vocab_size = 0;             // the tokenizer's real vocabulary
  std::size_t documents = 0;
  std::int64_t tokens = 0;
  bool tokenizer_from_cache = false;
};

// What dedloc-tokenize does: reads the corpus, trains or loads the tokenizer (cached in `work_dir`) and
// writes every sentence's ids to the token file `out` (write_token_corpus).
Result<TokenizeReport> tokenize_corpus_to_file(const TextCorpusOptions& corpus, int vocab_size,
                                               const std::string& work_dir, const std::string& out,
                                               Logger* log = &Logger::global());

}  // namespace dedloc::train
