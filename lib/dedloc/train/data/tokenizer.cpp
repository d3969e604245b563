#include "dedloc/train/data/tokenizer.hpp"

#include <filesystem>
#include <system_error>
#include <unordered_map>

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include "dedloc/core/files.hpp"

namespace dedloc::train {
namespace {

constexpr int kMinVocab = 16;

// Feeds the corpus's sentences to the trainer without copying them into a file.
class SentencesOf : public sentencepiece::SentenceIterator {
 public:
  explicit SentencesOf(const std::vector<Document>& documents) : documents_(documents) { skip_empty(); }
  bool done() const override { return document_ >= documents_.size(); }
  void Next() override {
    ++sentence_;
    skip_empty();
  }
  const std::string& value() const override { return documents_[document_].sentences[sentence_]; }
  sentencepiece::util::Status status() const override { return {}; }

 private:
  void skip_empty() {
    while (document_ < documents_.size() && sentence_ >= documents_[document_].sentences.size()) {
      ++document_;
      sentence_ = 0;
    }
  }
  const std::vector<Document>& documents_;
  size_t document_ = 0;
  size_t sentence_ = 0;
};

Result<std::string> train_model(const std::vector<Document>& documents, const TokenizerOptions& options) {
  const std::unordered_map<std::string, std::string> settings = {
      {"model_type", "unigram"},
      {"vocab_size", std::to_string(options.vocab_size)},
      {"hard_vocab_limit", "false"},  // a small corpus yields fewer pieces instead of an error
      {"pad_id", "0"},
      {"pad_piece", "[PAD]"},
      {"unk_id", "1"},
      {"unk_piece", "<unk>"},
      {"bos_id", "-1"},
      {"eos_id", "-1"},
      {"control_symbols", "[CLS],[SEP],[MASK]"},
      {"input_sentence_size", "0"},  // all sentences: sampling would draw on an unseeded generator
      {"num_threads", std::to_string(options.num_threads < 1 ? 1 : options.num_threads)},
      {"minloglevel", "1"},  // no INFO lines on stderr
  };
  SentencesOf sentences(documents);
  std::string model;
  auto status = sentencepiece::SentencePieceTrainer::Train(settings, &sentences, &model);
  if (!status.ok()) return error(Code::kInternal, std::string("SentencePiece training failed: ") + status.ToString());
  return model;
}

}  // namespace

Tokenizer::Tokenizer() : processor_(std::make_unique<sentencepiece::SentencePieceProcessor>()) {}
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

Result<Tokenizer> Tokenizer::from_model(std::string serialized) {
  Tokenizer tokenizer;
  auto status = tokenizer.processor_->LoadFromSerializedProto(serialized);
  if (!status.ok()) return error(Code::kMalformed, std::string("not a SentencePiece model: ") + status.ToString());
  const auto& sp = *tokenizer.processor_;
  struct Special {
    const char* piece;
    int id;
  };
  for (Special special : {Special{"[PAD]", kPadId}, Special{"<unk>", kUnkId}, Special{"[CLS]", kClsId},
                          Special{"[SEP]", kSepId}, Special{"[MASK]", kMaskId}}) {
    if (sp.PieceToId(special.piece) != special.id || sp.GetPieceSize() <= kFirstPieceId) {
      return error(Code::kMalformed, std::string("SentencePiece model without ") + special.piece + " at id " +
                                         std::to_string(special.id));
    }
  }
  tokenizer.model_ = std::move(serialized);
  return tokenizer;
}

Result<Tokenizer> Tokenizer::train_or_load(const std::vector<Document>& documents, const TokenizerOptions& options,
                                           Logger* log) {
  if (options.vocab_size < kMinVocab) {
    return error(Code::kInvalidArgument, "tokenizer vocab_size " + std::to_string(options.vocab_size) +
                                             " is below " + std::to_string(kMinVocab));
  }
  if (documents.empty()) return error(Code::kInvalidArgument, "cannot train a tokenizer on an empty corpus");

  std::string path;
  if (!options.cache_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(options.cache_dir, ec);
    if (ec) {
      return error(Code::kIo, "cannot create tokenizer cache directory " + options.cache_dir + ": " + ec.message());
    }
    path = (std::filesystem::path(options.cache_dir) /
            tokenizer_model_file_name(corpus_key(documents, options.vocab_size), options.vocab_size))
               .string();
    if (std::filesystem::exists(path, ec)) {
      auto cached = read_file(path);
      if (cached) {
        auto tokenizer = from_model(std::move(*cached));
        if (tokenizer) {
          tokenizer->cache_path_ = path;
          tokenizer->loaded_from_cache_ = true;
          return tokenizer;
        }
        log->warn("tokenizer") << "retraining: cached " << path << " is unusable: " << tokenizer.status().to_string();
      } else {
        log->warn("tokenizer") << "retraining: " << cached.status().to_string();
      }
    }
  }

  log->info("tokenizer") << "training a " << options.vocab_size << "-piece SentencePiece unigram model on "
                         << documents.size() << " documents";
  auto model = train_model(documents, options);
  if (!model) return model.status();
  auto tokenizer = from_model(std::move(*model));
  if (!tokenizer) return tokenizer.status().with_context("the trained tokenizer");
  if (!path.empty()) {
    DEDLOC_RETURN_IF_ERROR(write_file_atomically(path, tokenizer->model()).with_context("caching the tokenizer"));
    tokenizer->cache_path_ = path;
  }
  return tokenizer;
}

Result<std::vector<int>> Tokenizer::encode(std::string_view text) const {
  std::vector<int> ids;
  auto status = processor_->Encode(text, &ids);
  if (!status.ok()) return error(Code::kInternal, std::string("SentencePiece encode failed: ") + status.ToString());
  return ids;
}

Result<std::string> Tokenizer::decode(const std::vector<int>& ids) const {
  const int size = vocab_size();
  for (int id : ids) {
    if (id < 0 || id >= size) {
      return error(Code::kInvalidArgument,
                   "token id " + std::to_string(id) + " is outside the vocabulary of " + std::to_string(size));
    }
  }
  std::string text;
  auto status = processor_->Decode(ids, &text);
  if (!status.ok()) return error(Code::kInternal, std::string("SentencePiece decode failed: ") + status.ToString());
  return text;
}

int Tokenizer::vocab_size() const { return processor_->GetPieceSize(); }

}  // namespace dedloc::train

namespace dedloc::train {

std::vector<std::string> Tokenizer::pieces() const {
  std::vector<std::string> out;
  out.reserve(static_cast<size_t>(vocab_size()));
  for (int id = 0; id < vocab_size(); ++id) out.push_back(processor_->IdToPiece(id));
  return out;
}

Result<TokenizedCorpus> tokenize_documents(const Tokenizer& tokenizer, const std::vector<Document>& documents,
                                           int requested_vocab_size) {
  TokenizedCorpus corpus;
  corpus.key = corpus_key(documents, requested_vocab_size);
  corpus.pieces = tokenizer.pieces();
  corpus.documents.reserve(documents.size());
  for (const Document& document : documents) {
    auto& sentences = corpus.documents.emplace_back();
    sentences.reserve(document.sentences.size());
    for (const std::string& sentence : document.sentences) {
      auto ids = tokenizer.encode(sentence);
      if (!ids) return ids.status();
      sentences.emplace_back(ids->begin(), ids->end());
    }
  }
  return corpus;
}

Result<TokenizeReport> tokenize_corpus_to_file(const TextCorpusOptions& corpus_options, int vocab_size,
                                               const std::string& work_dir, const std::string& out, Logger* log) {
  auto corpus = read_text_corpus(corpus_options);
  if (!corpus) return corpus.status();
  TokenizerOptions options;
  options.vocab_size = vocab_size;
  options.cache_dir = work_dir;
  auto tokenizer = Tokenizer::train_or_load(corpus->documents, options, log);
  if (!tokenizer) return tokenizer.status();
  auto tokens = tokenize_documents(*tokenizer, corpus->documents, vocab_size);
  if (!tokens) return tokens.status();
  DEDLOC_RETURN_IF_ERROR(write_token_corpus(out, *tokens));
  return TokenizeReport{.out = out,
                        .vocab_size = tokenizer->vocab_size(),
                        .documents = tokens->documents.size(),
                        .tokens = tokens->token_count(),
                        .tokenizer_from_cache = tokenizer->loaded_from_cache()};
}

}  // namespace dedloc::train
