// libtorch's exceptions at the trainer's edge (lib/dedloc/train/torch_errors.hpp): each kind becomes a
// Status with one line that says what was being done, and a prefetch thread's throw reaches the consumer
// as an error instead of std::terminate.
#include <catch2/catch.hpp>

#include <stdexcept>

#include <torch/torch.h>

#include "dedloc/train/prefetcher.hpp"
#include "dedloc/train/torch_errors.hpp"

using namespace dedloc;
using namespace dedloc::train;

TEST_CASE("A device out of memory, a libtorch error and a std::exception become one-line statuses",
          "[torch][torch_errors]") {
  auto oom = guard_torch("computing a micro-batch", [] {
    TORCH_CHECK_WITH(OutOfMemoryError, false, "CUDA out of memory. Tried to allocate 2.00 GiB\nmore context");
  });
  CHECK(oom.code() == Code::kTooLarge);
  CHECK(oom.message() ==
        "out of memory on the device while computing a micro-batch: CUDA out of memory. Tried to allocate 2.00 GiB; "
        "more context; a smaller --batch-size needs less");

  // A real one: shapes that cannot be multiplied.
  auto shapes = guard_torch("taking global step 3", [] { (void)torch::ones({2, 3}).mm(torch::ones({2, 3})); });
  CHECK(shapes.code() == Code::kInternal);
  CHECK_THAT(shapes.message(), Catch::StartsWith("libtorch failed while taking global step 3: "));
  CHECK(shapes.message().find('\n') == std::string::npos);

  auto plain = guard_torch("starting", []() -> Result<int> { throw std::runtime_error("no"); });
  REQUIRE_FALSE(plain);
  CHECK(plain.status().message() == "starting failed: no");

  auto unknown = guard_torch("starting", [] { throw 7; });
  CHECK(unknown.message() == "starting failed: an unknown exception");

  auto fine = guard_torch("starting", [] { return Result<int>(3); });
  REQUIRE(fine);
  CHECK(*fine == 3);
}

TEST_CASE("A producer that throws fails the prefetcher's next item instead of the process", "[torch][torch_errors]") {
  int made = 0;
  Prefetcher<int> items(2, [&made]() -> Result<int> {
    if (made == 2) throw std::runtime_error("the disk went away");
    return made++;
  });
  CHECK(*items.next() == 0);
  CHECK(*items.next() == 1);
  auto failed = items.next();
  REQUIRE_FALSE(failed);
  CHECK(failed.status().message() == "preparing a micro-batch failed: the disk went away");
}
