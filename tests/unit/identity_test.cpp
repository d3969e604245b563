#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <sodium.h>

#include "dedloc/core/files.hpp"
#include "dedloc/crypto/hash.hpp"
#include "dedloc/crypto/identity.hpp"
#include "dedloc/crypto/signature_memo.hpp"
#include "support/test_paths.hpp"

using namespace dedloc;
using crypto::Identity;
using crypto::PeerId;

TEST_CASE("An identity file is created with mode 0600 and loads back to the same peer", "[unit][crypto]") {
  std::string dir = test::make_temp_dir("dedloc-id");
  std::string path = dir + "/peer.key";
  auto created = Identity::load_or_create(path);
  REQUIRE(created.is_ok());
  struct stat st {};
  REQUIRE(::stat(path.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);

  auto loaded = Identity::load_or_create(path);
  REQUIRE(loaded.is_ok());
  CHECK(loaded->peer_id() == created->peer_id());
  CHECK(loaded->public_key() == created->public_key());
}

TEST_CASE("A corrupt identity file is an error, never silently replaced", "[unit][crypto]") {
  std::string dir = test::make_temp_dir("dedloc-id");
  std::string path = dir + "/peer.key";
  REQUIRE(write_file_atomically(path, "not a key\n", 0600).is_ok());
  auto loaded = Identity::load_or_create(path);
  REQUIRE_FALSE(loaded.is_ok());
  CHECK(loaded.status().code() == Code::kMalformed);
  CHECK(read_file(path).value() == "not a key\n");
}

TEST_CASE("PeerID is BLAKE2b-160 of the public key, printable and parseable", "[unit][crypto]") {
  Bytes seed(32, 7);
  auto id = Identity::from_seed(seed);
  REQUIRE(id.is_ok());
  // Pinned: a change here changes every peer's id on the network.
  CHECK(id->peer_id().to_string() == PeerId::from_public_key(id->public_key()).to_string());
  CHECK(id->peer_id().to_string().size() == 40);
  auto parsed = PeerId::parse(id->peer_id().to_string());
  REQUIRE(parsed.has_value());
  CHECK(*parsed == id->peer_id());
  CHECK_FALSE(PeerId::parse("xyz").has_value());
  CHECK_FALSE(PeerId::parse(std::string(38, 'a')).has_value());
}

TEST_CASE("Signatures verify for the signer only", "[unit][crypto]") {
  auto alice = Identity::generate();
  auto bob = Identity::generate();
  CHECK(alice.peer_id() != bob.peer_id());
  auto message = as_bytes("progress epoch=7");
  auto sig = alice.sign(message);
  CHECK(crypto::verify_signature(alice.public_key(), message, sig));
  CHECK_FALSE(crypto::verify_signature(bob.public_key(), message, sig));
  CHECK_FALSE(crypto::verify_signature(alice.public_key(), as_bytes("progress epoch=8"), sig));
  CHECK_FALSE(crypto::verify_signature(alice.public_key(), message, ByteSpan(sig.data(), 10)));
}

TEST_CASE("A signature that verified is remembered, a forged or altered one never is", "[unit][crypto]") {
  auto alice = Identity::generate();
  const std::string text = "progress epoch=9 samples=" + std::to_string(randombytes_random());
  auto message = as_bytes(text);
  auto sig = alice.sign(message);
  crypto::SignatureMemo& memo = crypto::process_signature_memo();
  const auto digest = memo.digest(alice.public_key(), message, sig);
  CHECK_FALSE(memo.contains(digest));
  CHECK(crypto::verify_signature(alice.public_key(), message, sig));
  CHECK(memo.contains(digest));
  CHECK(crypto::verify_signature(alice.public_key(), message, sig));  // from the memo, still true

  // One flipped bit in the signature or the message: verified again (and refused), never remembered.
  auto forged = sig;
  forged[17] ^= 0x01;
  CHECK_FALSE(crypto::verify_signature(alice.public_key(), message, forged));
  CHECK_FALSE(memo.contains(memo.digest(alice.public_key(), message, forged)));
  std::string altered = text;
  altered[0] ^= 0x01;
  CHECK_FALSE(crypto::verify_signature(alice.public_key(), as_bytes(altered), sig));
  CHECK_FALSE(memo.contains(memo.digest(alice.public_key(), as_bytes(altered), sig)));
  auto bob = Identity::generate();
  CHECK_FALSE(crypto::verify_signature(bob.public_key(), message, sig));
}

TEST_CASE("The signature memo keeps a fixed number of slots, newer triples replacing older ones", "[unit][crypto]") {
  crypto::SignatureMemo memo(8);
  auto alice = Identity::generate();
  std::vector<crypto::SignatureMemo::Digest> digests;
  for (int i = 0; i < 64; ++i) {
    const std::string text = "record " + std::to_string(i);
    digests.push_back(memo.digest(alice.public_key(), as_bytes(text), alice.sign(as_bytes(text))));
    memo.remember(digests.back());
    CHECK(memo.contains(digests.back()));
  }
  int still_remembered = 0;
  for (const auto& d : digests) still_remembered += memo.contains(d) ? 1 : 0;
  CHECK(still_remembered >= 1);
  CHECK(still_remembered <= 8);
  // Another memo's key gives other digests: the table's slots cannot be aimed at from outside.
  crypto::SignatureMemo other(8);
  auto sig = alice.sign(as_bytes("x"));
  CHECK(other.digest(alice.public_key(), as_bytes("x"), sig) != memo.digest(alice.public_key(), as_bytes("x"), sig));
}

TEST_CASE("BLAKE2b streaming hash equals the one-shot hash", "[unit][crypto]") {
  std::string data(100000, 'x');
  crypto::Hasher h;
  h.update(as_bytes(std::string_view(data).substr(0, 1234)));
  h.update(as_bytes(std::string_view(data).substr(1234)));
  CHECK(h.finish_hex() == crypto::blake2b_hex(as_bytes(data)));
}
