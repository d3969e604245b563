// Where a node looks once its routing table has emptied (lib/dedloc/dht/way_back.hpp).
#include <catch2/catch.hpp>

#include "dedloc/dht/way_back.hpp"
#include "support/random_ids.hpp"

using namespace dedloc;
using namespace dedloc::dht;
using namespace std::chrono_literals;

namespace {
Contact contact(int n) { return Contact{test::numbered_id(static_cast<std::uint8_t>(n)), "tcp://10.0.0." + std::to_string(n) + ":31400", 0}; }
std::vector<std::string> endpoints(const std::vector<net::PeerAddress>& addresses) {
  std::vector<std::string> out;
  for (const auto& a : addresses) out.push_back(a.endpoint);
  return out;
}
const TimePoint kStart{};
}  // namespace

TEST_CASE("Way back: the contacts dropped last come first, then the initial peers, each once", "[unit][dht]") {
  WayBack way_back(3);
  CHECK(way_back.take_due(kStart, 2s).empty());  // nothing known: nothing to try (and no attempt counted)
  way_back.set_initial({{"tcp://10.0.0.1:31400", std::nullopt}, {"tcp://10.0.0.9:31337", std::nullopt}});
  for (int n : {1, 2, 3, 4}) way_back.dropped(contact(n));
  way_back.dropped(contact(3));  // dropped again: one entry, now the newest
  // At most 3 dropped, newest first; the initial peer at .1 is contact 1's endpoint, already out of the
  // dropped list (bounded), so it comes back as an initial peer; .9 is one too.
  const auto due = way_back.take_due(kStart, 2s);
  CHECK(endpoints(due) == std::vector<std::string>{"tcp://10.0.0.3:31400", "tcp://10.0.0.4:31400", "tcp://10.0.0.2:31400",
                                                   "tcp://10.0.0.1:31400", "tcp://10.0.0.9:31337"});
  CHECK(due[0].peer_id == test::numbered_id(3));  // a dropped contact must answer as itself
  CHECK_FALSE(due[3].peer_id.has_value());
}

TEST_CASE("Way back: a contact that answered again is no longer a fallback", "[unit][dht]") {
  WayBack way_back;
  way_back.dropped(contact(1));
  way_back.dropped(contact(2));
  way_back.answered(test::numbered_id(2));
  CHECK(endpoints(way_back.take_due(kStart, 2s)) == std::vector<std::string>{"tcp://10.0.0.1:31400"});
}

TEST_CASE("Way back: one attempt per retry interval", "[unit][dht]") {
  WayBack way_back;
  way_back.set_initial({{"tcp://10.0.0.9:31337", std::nullopt}});
  CHECK(way_back.take_due(kStart, 2s).size() == 1);
  // Other lookups that find the table empty meanwhile do not ping everyone again.
  CHECK(way_back.take_due(kStart + 1s, 2s).empty());
  CHECK(way_back.take_due(kStart + 1999ms, 2s).empty());
  CHECK(way_back.take_due(kStart + 2s, 2s).size() == 1);
}
