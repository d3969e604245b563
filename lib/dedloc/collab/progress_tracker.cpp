#include "dedloc/collab/progress_tracker.hpp"

#include "dedloc/dht/record.hpp"


namespace dedloc::collab {

namespace {
constexpr std::string_view kLog = "progress";
}

ProgressTracker::ProgressTracker(dht::Node& node, TrackerOptions options)
    : node_(node), options_(std::move(options)), own_subkey_(dht::owner_marker(node.public_key())) {
  next_fetch_ = std::chrono::steady_clock::now();
  thread_ = std::thread([this] { run(); });
}

ProgressTracker::~ProgressTracker() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void ProgressTracker::report(PeerProgress local) {
  local.time = SystemClock::instance().unix_seconds();
  std::lock_guard lock(mutex_);
  bool epoch_changed = !local_ || local_->epoch != local.epoch || local_->params_hash != local.params_hash;
  bool first_rate = !published_rate_ && local.samples_per_second > 0;
  local_ = std::move(local);
  if (epoch_changed || first_rate) wake_.notify_all();
}

CollaborationState ProgressTracker::state() const { return state_at(0, /*ours_computing=*/true); }

CollaborationState ProgressTracker::state_if_we_stop(double seconds_ahead) const {
  return state_at(seconds_ahead, /*ours_computing=*/false);
}

CollaborationState ProgressTracker::state_at(double seconds_ahead, bool ours_computing) const {
  std::lock_guard lock(mutex_);
  std::vector<PeerProgress> peers = others_;
  if (local_) {
    peers.push_back(*local_);
    if (!ours_computing) peers.back().samples_per_second = 0;
  }
  return estimate_collaboration(peers, options_.target_batch_size,
                                SystemClock::instance().unix_seconds() + seconds_ahead, options_.estimate);
}

std::vector<PeerProgress> ProgressTracker::others_records() const {
  std::lock_guard lock(mutex_);
  return others_;
}

size_t ProgressTracker::others() const {
  std::lock_guard lock(mutex_);
  return others_.size();
}

void ProgressTracker::refresh_now() {
  std::unique_lock lock(mutex_);
  std::uint64_t target = fetches_done_ + 1;
  fetch_requested_ = true;
  wake_.notify_all();
  // Bounded: one fetch takes at most dht_timeout; a publish may run first.
  wake_.wait_for(lock, 2 * options_.dht_timeout + std::chrono::seconds(1),
                 [&] { return fetches_done_ >= target || stopping_; });
}

void ProgressTracker::run() {
  const Duration republish = options_.record_ttl / 3;
  std::unique_lock lock(mutex_);
  // A new epoch, or a first rate, of ours: news the others are likely making too (the header says why).
  auto news = [this] {
    return local_ && (!published_epoch_ || *published_epoch_ != local_->epoch || published_hash_ != local_->params_hash ||
                      (!published_rate_ && local_->samples_per_second > 0));
  };
  while (!stopping_) {
    auto now = std::chrono::steady_clock::now();
    const bool is_news = news();
    if (is_news || (local_ && now - last_publish_ >= republish)) {
      PeerProgress snapshot = *local_;
      // A republish of an unchanged report (the trainer is busy averaging or downloading) says "still
      // here with these samples": it must carry the current time, or its expiration would not be newer than
      // the stored record's and the DHT would refuse it.
      snapshot.time = SystemClock::instance().unix_seconds();
      published_epoch_ = snapshot.epoch;
      published_hash_ = snapshot.params_hash;
      published_rate_ = snapshot.samples_per_second > 0;
      last_publish_ = now;
      if (is_news) next_fetch_ = std::min(next_fetch_, now + from_seconds(options_.estimate.min_refresh_seconds));
      lock.unlock();
      publish(snapshot);
      lock.lock();
      continue;
    }
    if (fetch_requested_ || now >= next_fetch_) {
      fetch_requested_ = false;
      lock.unlock();
      fetch();
      lock.lock();
      ++fetches_done_;
      wake_.notify_all();
      continue;
    }
    TimePoint until = next_fetch_;
    if (local_) until = std::min(until, last_publish_ + republish);
    wake_.wait_until(lock, until, [&] { return stopping_ || fetch_requested_ || news(); });
  }
}

void ProgressTracker::publish(const PeerProgress& progress) {
  auto published = publish_progress(node_, options_.run_id, progress, options_.record_ttl,
                                    Deadline::after(options_.dht_timeout));
  if (!published.is_ok()) {
    Logger::Line(options_.log, LogLevel::kWarning, kLog) << "could not publish our progress: " << published.to_string();
  }
}

void ProgressTracker::fetch() {
  auto records = read_progress(node_, options_.run_id, Deadline::after(options_.dht_timeout));
  std::lock_guard lock(mutex_);
  if (!records) {
    Logger::Line(options_.log, LogLevel::kWarning, kLog) << "could not read the swarm's progress: " << records.status().to_string();
    next_fetch_ = std::chrono::steady_clock::now() + from_seconds(options_.estimate.min_refresh_seconds);
    return;
  }
  others_.clear();
  for (auto& r : *records) {
    if (r.peer != own_subkey_) others_.push_back(std::move(r));
  }
  std::vector<PeerProgress> peers = others_;
  if (local_) peers.push_back(*local_);
  auto state = estimate_collaboration(peers, options_.target_batch_size, SystemClock::instance().unix_seconds(),
                                      options_.estimate);
  next_fetch_ = std::chrono::steady_clock::now() + from_seconds(state.next_refresh_seconds);
}

Status ProgressTracker::withdraw(Deadline deadline) {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
  return withdraw_progress(node_, options_.run_id, options_.record_ttl, deadline);
}

}  // namespace dedloc::collab
