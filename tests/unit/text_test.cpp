// The language recipe's text pipeline without torch: reading the fortunes corpus, the SentencePiece
// tokenizer, the token file and dedloc-tokenize run as a separate process.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>

#include "dedloc/core/files.hpp"
#include "dedloc/train/data/text_corpus.hpp"
#include "dedloc/train/data/token_corpus.hpp"
#include "dedloc/train/data/tokenizer.hpp"
#include "support/test_paths.hpp"

using namespace dedloc;
using namespace dedloc::train;

TEST_CASE("The fortunes package reads as documents of sentences", "[unit][text][corpus]") {
  auto corpus = read_text_corpus({});
  INFO(corpus.status().to_string());
  REQUIRE(corpus.is_ok());
  CHECK(corpus->documents.size() > 10000);
  CHECK(corpus->files.size() > 30);
  for (const auto& file : corpus->files) {
    INFO(file);
    CHECK_FALSE(file.ends_with(".dat"));
    CHECK_FALSE(file.ends_with(".u8"));
  }
  size_t sentences = 0;
  for (const auto& document : corpus->documents) {
    REQUIRE_FALSE(document.sentences.empty());
    for (const auto& sentence : document.sentences) {
      ++sentences;
      REQUIRE_FALSE(sentence.empty());
      REQUIRE(sentence.find_first_of("\n\t\r") == std::string::npos);
      REQUIRE(sentence.front() != ' ');
      REQUIRE(sentence.back() != ' ');
      REQUIRE(sentence != "%");
    }
  }
  CHECK(sentences > 2 * corpus->documents.size());  // most fortunes are more than one sentence

  // The first fortune of the "fortunes" file, two sentences.
  auto found = std::find_if(corpus->documents.begin(), corpus->documents.end(), [](const Document& d) {
    return d.sentences.front() == "A day for firm decisions!!!!!";
  });
  REQUIRE(found != corpus->documents.end());
  CHECK(found->sentences == std::vector<std::string>{"A day for firm decisions!!!!!", "Or is it?"});

  TextCorpusOptions capped;
  capped.max_documents = 10;
  auto few = read_text_corpus(capped);
  REQUIRE(few.is_ok());
  CHECK(few->documents.size() == 10);
  CHECK(few->files.size() == 1);
}

TEST_CASE("Documents split at % lines or blank lines, sentences at punctuation and attributions",
          "[unit][text][corpus]") {
  auto fortunes = split_documents(
      "Line one wraps\nonto two.  Second   sentence!\n\t\t-- Some One\n%\nSee e.g. this one. Done\n%\n%\n", true);
  REQUIRE(fortunes.size() == 2);
  CHECK(fortunes[0].sentences ==
        std::vector<std::string>{"Line one wraps onto two.", "Second sentence!", "-- Some One"});
  CHECK(fortunes[1].sentences == std::vector<std::string>{"See e.g. this one.", "Done"});

  auto plain = split_documents("First doc, line one\nline two? Yes.\n\n\nSecond doc.\r\n", false);
  REQUIRE(plain.size() == 2);
  CHECK(plain[0].sentences == std::vector<std::string>{"First doc, line one line two?", "Yes."});
  CHECK(plain[1].sentences == std::vector<std::string>{"Second doc."});

  CHECK(split_sentences("\"Quoted!\" Then (more.) And") ==
        std::vector<std::string>{"\"Quoted!\"", "Then (more.)", "And"});
}

TEST_CASE("A corpus path without text is an error naming the path", "[unit][text][corpus]") {
  const test::ScopedTempDir tmp("albert-corpus");
  const std::string dir = tmp.path.string();
  TextCorpusOptions options;

  options.paths = {dir + "/missing"};
  auto missing = read_text_corpus(options);
  REQUIRE_FALSE(missing.is_ok());
  CHECK(missing.status().code() == Code::kNotFound);
  CHECK_THAT(missing.status().message(), Catch::Contains(dir + "/missing"));

  // Only strfile indexes, a hidden file and a subdirectory: nothing to read.
  REQUIRE(write_file_atomically(dir + "/cookie.dat", std::string("\0\0\0\2", 4)).is_ok());
  REQUIRE(write_file_atomically(dir + "/cookie.u8", "x").is_ok());
  REQUIRE(write_file_atomically(dir + "/.hidden", "Some text.").is_ok());
  std::filesystem::create_directory(dir + "/off");
  REQUIRE(write_file_atomically(dir + "/off/rude", "Offensive text.").is_ok());
  options.paths = {dir};
  auto empty = read_text_corpus(options);
  REQUIRE_FALSE(empty.is_ok());
  CHECK(empty.status().code() == Code::kNotFound);
  CHECK_THAT(empty.status().message(), Catch::Contains(dir));

  REQUIRE(write_file_atomically(dir + "/blank", "\n\n  \n").is_ok());
  options.paths = {dir + "/blank"};
  auto blank = read_text_corpus(options);
  REQUIRE_FALSE(blank.is_ok());
  CHECK_THAT(blank.status().message(), Catch::Contains(dir + "/blank"));

  // A text file next to them is read, and only it.
  REQUIRE(write_file_atomically(dir + "/notes", "One. Two.\n\nThree.\n").is_ok());
  options.paths = {dir};
  auto notes = read_text_corpus(options);
  REQUIRE(notes.is_ok());
  CHECK(notes->files == std::vector<std::string>{dir + "/blank", dir + "/notes"});
  CHECK(notes->documents.size() == 2);
}

TEST_CASE("The SentencePiece tokenizer round-trips text, keeps special ids fixed and caches its model",
          "[unit][text][tokenizer]") {
  TextCorpusOptions corpus_options;
  corpus_options.max_documents = 3000;
  auto corpus = read_text_corpus(corpus_options);
  REQUIRE(corpus.is_ok());
  TokenizerOptions options;
  options.vocab_size = 1000;
  options.cache_dir = test::make_temp_dir("albert-tokenizer");

  auto trained = Tokenizer::train_or_load(corpus->documents, options);
  INFO(trained.status().to_string());
  REQUIRE(trained.is_ok());
  CHECK_FALSE(trained->loaded_from_cache());
  CHECK(std::filesystem::exists(trained->cache_path()));
  CHECK(trained->vocab_size() == 1000);

  const std::string text = "The quick brown fox jumps over the lazy dog.";
  auto ids = trained->encode(text);
  REQUIRE(ids.is_ok());
  CHECK(ids->size() >= 9);  // at least one piece per word
  for (int id : *ids) CHECK(id >= Tokenizer::kFirstPieceId);
  auto decoded = trained->decode(*ids);
  REQUIRE(decoded.is_ok());
  CHECK(*decoded == text);

  // Control symbols are never produced from text.
  auto spelled = trained->encode("[MASK] [CLS] [SEP] [PAD]");
  REQUIRE(spelled.is_ok());
  for (int id : *spelled) CHECK(id >= Tokenizer::kUnkId);
  CHECK(trained->decode({Tokenizer::kClsId, (*ids)[0], Tokenizer::kSepId, Tokenizer::kPadId}).is_ok());
  auto outside = trained->decode({1000});
  REQUIRE_FALSE(outside.is_ok());
  CHECK(outside.status().code() == Code::kInvalidArgument);

  auto cached = Tokenizer::train_or_load(corpus->documents, options);
  REQUIRE(cached.is_ok());
  CHECK(cached->loaded_from_cache());
  CHECK(cached->model() == trained->model());
  CHECK(cached->encode(text).value() == *ids);

  // Another peer training from the same corpus gets the very same model (no cache involved).
  TokenizerOptions uncached = options;
  uncached.cache_dir = "";
  auto again = Tokenizer::train_or_load(corpus->documents, uncached);
  REQUIRE(again.is_ok());
  CHECK(again->cache_path().empty());
  CHECK(again->model() == trained->model());

  CHECK(Tokenizer::from_model("not a model").status().code() == Code::kMalformed);
}

TEST_CASE("Token files round-trip and refuse what does not decode", "[unit][text][tokens]") {
  TokenizedCorpus corpus;
  corpus.key = 0x0123456789abcdefull;
  corpus.pieces = {"[PAD]", "<unk>", "[CLS]", "[SEP]", "[MASK]", "\xe2\x96\x81Hello", ",", "\xe2\x96\x81world", "!"};
  corpus.documents = {{{5, 6, 7, 8}, {}}, {{7}}};
  std::string dir = test::make_temp_dir("albert-tokens");
  std::string path = dir + "/tokens.bin";
  REQUIRE(write_token_corpus(path, corpus).is_ok());

  auto back = read_token_corpus(path);
  INFO(back.status().to_string());
  REQUIRE(back.is_ok());
  CHECK(back->key == corpus.key);
  CHECK(back->pieces == corpus.pieces);
  CHECK(back->documents == corpus.documents);
  CHECK(back->token_count() == 5);
  CHECK(back->render({5, 6, 7, 8}) == "Hello, world!");
  CHECK(back->render({2, 5, 4, 3}) == "[CLS] Hello[MASK][SEP]");

  auto bytes = read_file(path);
  REQUIRE(bytes.is_ok());
  auto refused = [&](std::string changed) {
    REQUIRE(write_file_atomically(path, changed).is_ok());
    auto read = read_token_corpus(path);
    return !read.is_ok() && read.status().code() == Code::kMalformed;
  };
  CHECK(refused(bytes->substr(0, bytes->size() - 1)));   // truncated
  CHECK(refused(*bytes + "x"));                          // trailing bytes
  CHECK(refused("NOTTOKEN" + bytes->substr(8)));          // magic
  std::string big_count = *bytes;
  big_count[23] = '\x7f';                                 // the piece count's high byte: more than the file holds
  CHECK(refused(big_count));
  std::string bad_id = *bytes;
  bad_id[bad_id.size() - 4] = '\x09';                     // the last id: 9 is outside 9 pieces
  CHECK(refused(bad_id));
  CHECK(read_token_corpus(dir + "/missing.bin").status().code() == Code::kNotFound);
}

TEST_CASE("load_tokenized_corpus runs dedloc-tokenize once, then reads the cache", "[unit][text][tokens]") {
  TokenizeOptions options;
  options.corpus.max_documents = 500;
  options.vocab_size = 400;
  const test::ScopedTempDir work("albert-load");
  options.work_dir = work.path.string();

  auto made = load_tokenized_corpus(options);
  INFO(made.status().to_string());
  REQUIRE(made.is_ok());
  CHECK(made->documents.size() == 500);
  CHECK(made->vocab_size() == 400);
  CHECK(made->pieces[SpecialTokens::kMask] == "[MASK]");
  auto text = read_text_corpus(options.corpus);
  REQUIRE(text.is_ok());
  CHECK(made->key == corpus_key(text->documents, 400));
  // The first fortune of the first file ("art"), rendered back from its ids.
  std::string first;
  for (const auto& sentence : made->documents[0]) {
    first += (first.empty() ? "" : " ") + made->render({sentence.begin(), sentence.end()});
  }
  std::string expected;
  for (const auto& sentence : text->documents[0].sentences) expected += (expected.empty() ? "" : " ") + sentence;
  CHECK(first == expected);

  std::string token_file = options.work_dir + "/" + token_file_name(made->key, 400);
  std::string model_file = options.work_dir + "/" + tokenizer_model_file_name(made->key, 400);
  CHECK(std::filesystem::exists(token_file));
  CHECK(std::filesystem::exists(model_file));

  // From the cache: the tool is not run again (a tool that does not exist would fail).
  TokenizeOptions cached = options;
  cached.tool = "/nonexistent/dedloc-tokenize";
  auto again = load_tokenized_corpus(cached);
  REQUIRE(again.is_ok());
  CHECK(again->documents == made->documents);

  // Without a cache the missing tool is an error that says what to do.
  cached.work_dir = "";
  auto missing = load_tokenized_corpus(cached);
  REQUIRE_FALSE(missing.is_ok());
  CHECK(missing.status().code() == Code::kUnavailable);
  CHECK_THAT(missing.status().message(), Catch::Contains("DEDLOC_TOKENIZE"));

  // A tool that fails: its error reaches the caller.
  TokenizeOptions failing = options;
  const test::ScopedTempDir failing_work("albert-load-fail");
  failing.work_dir = failing_work.path.string();
  failing.tool = "/bin/false";
  auto failed = load_tokenized_corpus(failing);
  REQUIRE_FALSE(failed.is_ok());
  CHECK(failed.status().code() == Code::kUnavailable);
  CHECK_THAT(failed.status().message(), Catch::Contains("exit status 1"));

  // A tool that hangs is killed at the deadline.
  std::string hanging = failing.work_dir + "/hang.sh";
  REQUIRE(write_file_atomically(hanging, "#!/bin/sh\nexec sleep 30\n", 0755).is_ok());
  failing.tool = hanging;
  failing.timeout = std::chrono::milliseconds(300);
  const auto started = std::chrono::steady_clock::now();
  auto hung = load_tokenized_corpus(failing);
  REQUIRE_FALSE(hung.is_ok());
  CHECK(hung.status().code() == Code::kTimeout);
  CHECK(std::chrono::steady_clock::now() - started < std::chrono::seconds(5));
}
