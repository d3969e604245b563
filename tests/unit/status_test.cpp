#include <catch2/catch.hpp>

#include "dedloc/core/status.hpp"

using namespace dedloc;

TEST_CASE("Status carries a code and an actionable message", "[unit][core]") {
  Status ok;
  CHECK(ok.is_ok());
  CHECK(ok.to_string() == "ok");

  Status timeout = error(Code::kTimeout, "no reply from tcp://127.0.0.1:5 within 200 ms");
  CHECK_FALSE(timeout.is_ok());
  CHECK(timeout.code() == Code::kTimeout);
  CHECK(timeout.to_string() == "timeout: no reply from tcp://127.0.0.1:5 within 200 ms");
  CHECK(timeout.with_context("bootstrap").to_string() == "timeout: bootstrap: no reply from tcp://127.0.0.1:5 within 200 ms");
  CHECK(ok.with_context("anything").is_ok());
}

TEST_CASE("Result holds a value or the reason there is none", "[unit][core]") {
  Result<int> value = 42;
  REQUIRE(value.is_ok());
  CHECK(*value == 42);
  CHECK(value.status().is_ok());

  Result<int> failed = error(Code::kNotFound, "no such key");
  CHECK_FALSE(failed.is_ok());
  CHECK(failed.status().code() == Code::kNotFound);
}

TEST_CASE("Status codes are stable wire numbers", "[unit][core]") {
  // These numbers travel in ErrorReply: changing one breaks compatibility with deployed peers.
  CHECK(static_cast<int>(Code::kTimeout) == 3);
  CHECK(static_cast<int>(Code::kMalformed) == 5);
  CHECK(static_cast<int>(Code::kVersionMismatch) == 6);
  CHECK(static_cast<int>(Code::kUnknownType) == 13);
  CHECK(static_cast<int>(Code::kUnauthorized) == 14);
  CHECK(code_name(Code::kVersionMismatch) == "version_mismatch");
}
