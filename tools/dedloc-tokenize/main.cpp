// dedloc-tokenize: turns a text corpus into SentencePiece token ids for the ALBERT task.
//
// dedloc-train does not run SentencePiece itself: Debian's libsentencepiece bundles a protobuf that cannot
// share a process with libtorch's (lib/dedloc/train/data/token_corpus.hpp). It runs this tool instead,
// which trains the tokenizer (or loads it from --work-dir), writes the ids of every sentence to --out and
// prints one JSON line describing what it wrote.
//
//   dedloc-tokenize --out tokens.bin [--vocab-size 8000] [--work-dir DIR] [--max-documents N] [PATH...]
#include <iostream>

#include <nlohmann/json.hpp>

#include "dedloc/cli/app.hpp"
#include "dedloc/train/data/tokenizer.hpp"

namespace {

constexpr std::string_view kTool = "dedloc-tokenize";

}  // namespace

int main(int argc, char** argv) {
  namespace cli = dedloc::cli;
  dedloc::train::TextCorpusOptions corpus;
  int vocab_size = 8000;
  std::string work_dir, out;
  cli::CommonFlags common;

  CLI::App app{"Trains (or loads) a SentencePiece unigram tokenizer on a text corpus and writes the corpus "
               "as token ids, for dedloc-train's ALBERT task.",
               std::string(kTool)};
  app.add_option("--out", out, "the token file to write (atomically)")->required();
  app.add_option("--vocab-size", vocab_size, "pieces to train, special tokens included")->capture_default_str();
  app.add_option("--work-dir", work_dir, "where the tokenizer model is cached (none: train every time)");
  app.add_option("--max-documents", corpus.max_documents, "read at most this many documents (0: all)")
      ->capture_default_str();
  app.add_option("paths", corpus.paths, "text files and directories (default: the fortunes package)");
  cli::add_common_flags(app, common, {});  // --log-level and --version only: it reads no config and joins no run
  if (auto exit = cli::parse(app, argc, argv)) return *exit;
  if (auto status = cli::setup_logging(common, dedloc::Logger::global()); !status.is_ok()) {
    return cli::report_failure(kTool, status);
  }

  auto report = dedloc::train::tokenize_corpus_to_file(corpus, vocab_size, work_dir, out);
  if (!report) return cli::report_failure(kTool, report.status());
  nlohmann::json line = {{"out", report->out},
                         {"vocab_size", report->vocab_size},
                         {"documents", report->documents},
                         {"tokens", report->tokens},
                         {"tokenizer", report->tokenizer_from_cache ? "cached" : "trained"}};
  std::cout << line.dump() << std::endl;
  return cli::kExitOk;
}
