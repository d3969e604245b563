// The Prometheus text writer against the format's rules, read back by an independent strict parser.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

#include "dedloc/monitor/exposition.hpp"
#include "dedloc/monitor/prometheus_text.hpp"
#include "support/check_failure.hpp"
#include "support/prometheus_format.hpp"

using namespace dedloc;
using namespace dedloc::monitor;

TEST_CASE("Samples follow their family's HELP and TYPE lines, label values escaped", "[unit][monitor]") {
  PrometheusText out;
  out.family("dedloc_things", PrometheusText::Type::kGauge, "Things, with a \\ and a\nnewline.")
      .sample(1.5, {{"peer", "a\"b\\c\nd"}})
      .sample(2, {{"peer", "plain"}});
  out.family("dedloc_events_total", PrometheusText::Type::kCounter, "Events.").sample(7);
  CHECK(out.text() ==
        "# HELP dedloc_things Things, with a \\\\ and a\\nnewline.\n"
        "# TYPE dedloc_things gauge\n"
        "dedloc_things{peer=\"a\\\"b\\\\c\\nd\"} 1.5\n"
        "dedloc_things{peer=\"plain\"} 2\n"
        "# HELP dedloc_events_total Events.\n"
        "# TYPE dedloc_events_total counter\n"
        "dedloc_events_total 7\n");
  auto families = test::parse_prometheus_text(out.text());
  REQUIRE(families.size() == 2);
  CHECK(families[0].help == "Things, with a \\ and a\nnewline.");
  CHECK(families[0].samples[0].labels.at("peer") == "a\"b\\c\nd");
  CHECK(families[1].type == "counter");
}

TEST_CASE("Numbers are written as Go's parser reads them", "[unit][monitor]") {
  CHECK(format_sample_value(std::nan("")) == "NaN");
  CHECK(format_sample_value(std::numeric_limits<double>::infinity()) == "+Inf");
  CHECK(format_sample_value(-std::numeric_limits<double>::infinity()) == "-Inf");
  CHECK(format_sample_value(0.1) == "0.1");
  CHECK(format_sample_value(1e21) == "1e+21");
  CHECK(format_sample_value(-3) == "-3");
  CHECK(std::stod(format_sample_value(1795455591.6806493)) == 1795455591.6806493);  // round trip
}

TEST_CASE("Names outside the grammar, counters without _total and families written twice are bugs",
          "[unit][monitor]") {
  auto gauge = [](const char* name) {
    return [name] { PrometheusText().family(name, PrometheusText::Type::kGauge, ""); };
  };
  CHECK(test::fails_check(gauge("2bad"), "not a Prometheus metric name: 2bad"));
  CHECK(test::fails_check(gauge("bad-name"), "not a Prometheus metric name: bad-name"));
  CHECK(test::fails_check([] { PrometheusText().family("dedloc_events", PrometheusText::Type::kCounter, ""); },
                          "ends in _total: dedloc_events"));
  CHECK(test::fails_check([] { PrometheusText().sample(1); }, "a Prometheus sample before any family"));
  auto with_family = [](auto then) {
    return [then] {
      PrometheusText out;
      out.family("dedloc_x", PrometheusText::Type::kGauge, "x");
      then(out);
    };
  };
  auto sample_labelled = [&](std::string label) {
    return with_family([label](PrometheusText& out) { out.sample(1, {{label, "v"}}); });
  };
  CHECK(test::fails_check(sample_labelled("bad-label"), "not a Prometheus label name: bad-label"));
  CHECK(test::fails_check(sample_labelled("__reserved"), "not a Prometheus label name: __reserved"));
  CHECK(test::fails_check(
      with_family([](PrometheusText& out) { out.family("dedloc_x", PrometheusText::Type::kGauge, "again"); }),
      "Prometheus family written twice: dedloc_x"));
  // And the same calls with valid names pass: the child returns instead of aborting.
  CHECK_FALSE(test::run_in_child(with_family([](PrometheusText& out) { out.sample(1, {{"peer", "v"}}); })).aborted);
}

TEST_CASE("The strict parser refuses what Prometheus refuses", "[unit][monitor]") {
  CHECK_THROWS(test::parse_prometheus_text("x 1"));                                   // no final newline
  CHECK_THROWS(test::parse_prometheus_text("x{a=\"1} 1\n"));                          // unterminated value
  CHECK_THROWS(test::parse_prometheus_text("x{a=\"\\t\"} 1\n"));                      // bad escape
  CHECK_THROWS(test::parse_prometheus_text("x one\n"));                               // not a number
  CHECK_THROWS(test::parse_prometheus_text("x 1\nx 2\n"));                            // same series twice
  CHECK_THROWS(test::parse_prometheus_text("x 1\ny 1\nx{a=\"b\"} 1\n"));              // family split
  CHECK_THROWS(test::parse_prometheus_text("x 1\n# TYPE x gauge\n"));                 // TYPE after samples
  CHECK_THROWS(test::parse_prometheus_text("# TYPE x gauge\n# TYPE x gauge\nx 1\n"));  // TYPE twice
  CHECK_THROWS(test::parse_prometheus_text("1x 1\n"));                                // bad name
  CHECK(test::parse_prometheus_text("# a comment\nx{a=\"b\",c=\"d\"} -Inf 1700000000000\n").size() == 1);
}

TEST_CASE("A monitor's /metrics parses strictly, with hostile peer ids and a missing loss", "[unit][monitor]") {
  SwarmView view;
  view.time = 1700000000;
  view.epoch = 12;
  view.trainers = 2;
  view.aux = 1;
  view.samples_per_second = 321.5;
  view.target_batch_size = 4096;
  view.eta_seconds = 3.25;
  view.peers = {{.peer_id = "aa", .role = "trainer", .epoch = 12, .loss = 2.5, .samples_per_second = 300},
                {.peer_id = "b\"}\n{", .role = "trainer", .epoch = 11, .samples_per_second = 21.5},
                {.peer_id = "cc", .role = "aux", .epoch = 12, .rounds = 9}};
  MonitorCounters counters{.polls = 5, .poll_errors = 1, .last_poll_time = 1700000000.5};
  auto families = test::parse_prometheus_text(metrics_text("run \"x\"", view, counters));
  std::map<std::string, test::PrometheusFamily> by_name;
  for (auto& f : families) by_name[f.name] = f;
  CHECK(by_name.at("dedloc_epoch").samples.at(0).value == 12);
  CHECK(by_name.at("dedloc_epoch").samples.at(0).labels.at("run") == "run \"x\"");
  CHECK(by_name.at("dedloc_peers").samples.size() == 3);
  CHECK(by_name.count("dedloc_loss") == 0);  // no mean loss: no sample rather than a made-up 0
  CHECK(by_name.at("dedloc_eta_seconds").samples.at(0).value == 3.25);
  REQUIRE(by_name.at("dedloc_peer_loss").samples.size() == 1);  // only the peer that has one
  CHECK(by_name.at("dedloc_peer_epoch").samples.at(1).labels.at("peer") == "b\"}\n{");
  CHECK(by_name.at("dedloc_monitor_polls_total").type == "counter");
  CHECK(by_name.at("dedloc_monitor_poll_errors_total").samples.at(0).value == 1);
}

TEST_CASE("/metrics shows the mode, inner steps and bytes per sample when the peers say them", "[unit][monitor]") {
  SwarmView view;
  view.trainers = 2;
  view.aux = 1;
  view.mode = "diloco";
  view.inner_steps = 7.5;
  view.bytes_per_sample = 1234.5;
  view.peers = {{.peer_id = "aa", .role = "trainer", .mode = "diloco", .inner_steps = 8, .bytes_per_sample = 1000},
                {.peer_id = "bb", .role = "trainer", .mode = "diloco", .inner_steps = 7},
                {.peer_id = "cc", .role = "aux"}};
  auto families = test::parse_prometheus_text(metrics_text("r", view, MonitorCounters{}));
  std::map<std::string, test::PrometheusFamily> by_name;
  for (auto& f : families) by_name[f.name] = f;
  REQUIRE(by_name.at("dedloc_collaboration_mode").samples.size() == 1);
  CHECK(by_name.at("dedloc_collaboration_mode").samples.at(0).labels.at("mode") == "diloco");
  CHECK(by_name.at("dedloc_inner_steps").samples.at(0).value == 7.5);
  CHECK(by_name.at("dedloc_bytes_per_sample").samples.at(0).value == 1234.5);
  REQUIRE(by_name.at("dedloc_peer_inner_steps").samples.size() == 2);  // not the aux peer
  CHECK(by_name.at("dedloc_peer_inner_steps").samples.at(1).value == 7);
  REQUIRE(by_name.at("dedloc_peer_bytes_per_sample").samples.size() == 1);  // only the peer that computed
  CHECK(by_name.at("dedloc_peer_bytes_per_sample").samples.at(0).labels.at("peer") == "aa");

  // Peers that say nothing of it (older trainers): no swarm-wide mode, inner steps or bytes per sample.
  SwarmView old;
  old.trainers = 1;
  old.peers = {{.peer_id = "aa", .role = "trainer"}};
  for (const auto& f : test::parse_prometheus_text(metrics_text("r", old, MonitorCounters{}))) {
    INFO(f.name);
    CHECK(f.name != "dedloc_collaboration_mode");
    CHECK(f.name != "dedloc_inner_steps");
    CHECK(f.name != "dedloc_bytes_per_sample");
  }
}
