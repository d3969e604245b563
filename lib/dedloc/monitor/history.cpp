#include "dedloc/monitor/history.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <sstream>

#include <nlohmann/json.hpp>

#include "dedloc/core/files.hpp"

namespace dedloc::monitor {

namespace {

constexpr const char* kCsvHeader = "time,epoch,peers,trainers,clients,aux,samples_per_second,loss,eta_seconds\n";
constexpr size_t kMaxHistoryBytes = 256u << 20;

nlohmann::json optional_number(const std::optional<double>& x) {
  return x ? nlohmann::json(*x) : nlohmann::json(nullptr);
}

nlohmann::json row_json(const HistoryRow& row) {
  return {{"time", row.time},       {"epoch", row.epoch},
          {"peers", row.peers},     {"trainers", row.trainers},
          {"clients", row.clients}, {"aux", row.aux},
          {"samples_per_second", row.samples_per_second},
          {"loss", optional_number(row.loss)},
          {"eta_seconds", optional_number(row.eta_seconds)}};
}

std::optional<HistoryRow> from_json_line(const std::string& line) {
  auto j = nlohmann::json::parse(line, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return std::nullopt;
  try {
    HistoryRow row;
    row.time = j.at("time").get<double>();
    row.epoch = j.at("epoch").get<std::uint64_t>();
    row.peers = j.at("peers").get<size_t>();
    row.trainers = j.value("trainers", size_t{0});
    row.clients = j.value("clients", size_t{0});
    row.aux = j.value("aux", size_t{0});
    row.samples_per_second = j.at("samples_per_second").get<double>();
    if (j.contains("loss") && j["loss"].is_number()) row.loss = j["loss"].get<double>();
    if (j.contains("eta_seconds") && j["eta_seconds"].is_number()) row.eta_seconds = j["eta_seconds"].get<double>();
    return row;
  } catch (const nlohmann::json::exception&) {
    return std::nullopt;
  }
}

std::string csv_number(const std::optional<double>& x) {
  if (!x) return "";
  std::ostringstream out;
  out.precision(10);
  out << *x;
  return out.str();
}

std::string csv_line(const HistoryRow& row) {
  std::ostringstream out;
  out.precision(15);
  out << row.time << ',' << row.epoch << ',' << row.peers << ',' << row.trainers << ',' << row.clients << ','
      << row.aux << ',' << csv_number(row.samples_per_second) << ',' << csv_number(row.loss) << ','
      << csv_number(row.eta_seconds) << '\n';
  return out.str();
}

// Appends `text` to `path` (created with `header` first when new), starting on a fresh line if a killed
// writer left a torn one.
Status append_line(const std::string& path, const std::string& header, const std::string& text) {
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0644);  // read: the last byte
  if (fd < 0) return error(Code::kIo, "cannot open " + path + ": " + std::strerror(errno));
  std::string out;
  struct stat st {};
  if (::fstat(fd, &st) == 0 && st.st_size == 0) {
    out = header;
  } else if (st.st_size > 0) {
    char last = '\n';
    if (::pread(fd, &last, 1, st.st_size - 1) == 1 && last != '\n') out = "\n";
  }
  out += text;
  ssize_t n = ::write(fd, out.data(), out.size());
  int saved = errno;
  ::close(fd);
  if (n != static_cast<ssize_t>(out.size())) {
    return error(Code::kIo, "cannot append to " + path + ": " + std::strerror(n < 0 ? saved : ENOSPC));
  }
  return Status::ok();
}

}  // namespace

HistoryRow HistoryRow::of(const SwarmView& view) {
  HistoryRow row;
  row.time = view.time;
  row.epoch = view.epoch;
  row.peers = view.alive();
  row.trainers = view.trainers;
  row.clients = view.clients;
  row.aux = view.aux;
  row.samples_per_second = view.samples_per_second;
  row.loss = view.mean_loss;
  row.eta_seconds = view.eta_seconds;
  return row;
}

Result<History> History::open(const std::string& dir, size_t keep) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return error(Code::kIo, "cannot create the history folder " + dir + ": " + ec.message());
  History history(keep);
  history.dir_ = dir;
  auto text = read_file(dir + "/history.jsonl", kMaxHistoryBytes);
  if (!text && text.status().code() != Code::kNotFound) return text.status();
  if (text) {
    std::istringstream lines(*text);
    std::string line;
    while (std::getline(lines, line)) {
      auto row = from_json_line(line);
      if (!row) continue;  // a torn last line, or a hand edit
      history.rows_.push_back(*row);
      if (history.rows_.size() > keep) history.rows_.pop_front();
    }
  }
  return history;
}

Result<bool> History::record(const SwarmView& view) {
  HistoryRow row = HistoryRow::of(view);
  if (!rows_.empty() && rows_.back().epoch == row.epoch && rows_.back().peers == row.peers) return false;
  rows_.push_back(row);
  if (rows_.size() > keep_) rows_.pop_front();
  if (!dir_.empty()) DEDLOC_RETURN_IF_ERROR(append_to_files(row));
  return true;
}

Status History::append_to_files(const HistoryRow& row) {
  DEDLOC_RETURN_IF_ERROR(append_line(dir_ + "/history.csv", kCsvHeader, csv_line(row)));
  return append_line(dir_ + "/history.jsonl", "", row_json(row).dump() + "\n");
}

std::string History::to_json() const {
  auto array = nlohmann::json::array();
  for (const auto& row : rows_) array.push_back(row_json(row));
  return array.dump();
}

}  // namespace dedloc::monitor
