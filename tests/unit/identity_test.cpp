#include <catch2/catch.hpp>

#include <sys/stat.h>

#include "dedloc/core/files.hpp"
#include "dedloc/crypto/hash.hpp"
#include "dedloc/crypto/identity.hpp"
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

TEST_CASE("BLAKE2b streaming hash equals the one-shot hash", "[unit][crypto]") {
  std::string data(100000, 'x');
  crypto::Hasher h;
  h.update(as_bytes(std::string_view(data).substr(0, 1234)));
  h.update(as_bytes(std::string_view(data).substr(1234)));
  CHECK(h.finish_hex() == crypto::blake2b_hex(as_bytes(data)));
}
