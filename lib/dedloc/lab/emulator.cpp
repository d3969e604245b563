#include "dedloc/lab/emulator.hpp"

#include <pthread.h>
#include <sched.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace dedloc::lab {

namespace {

constexpr size_t kMaxPacket = 65536;
// Packets the emulator holds at once (in queues and on the wire): beyond it, new ones are dropped. Far
// above what the lab's queues admit (each direction holds about 100 ms of its rate).
constexpr size_t kMaxPacketsHeld = 1 << 16;
// Packets read from one host before looking at the others and at what came due (fairness, timeliness).
constexpr int kReadBurst = 32;

double cpu_seconds_of(clockid_t clock) {
  timespec t{};
  ::clock_gettime(clock, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) / 1e9;
}

// Closes a file descriptor when it goes out of scope.
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

Emulator::Emulator(const LabNetwork& network, std::vector<HostLink> links, std::vector<bool> behind_nat,
                   std::uint64_t seed)
    : network_(network),
      behind_nat_(std::move(behind_nat)),
      wake_fd_(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)),
      model_(std::move(links), seed),
      scratch_(kMaxPacket) {
  behind_nat_.resize(network_.hosts().size(), false);
}

Emulator::~Emulator() {
  if (wake_fd_ >= 0) ::close(wake_fd_);
}

void Emulator::stop() {
  stopping_ = true;
  const std::uint64_t one = 1;
  (void)!::write(wake_fd_, &one, sizeof one);
}

void Emulator::set_link_up(size_t host, bool up) {
  std::lock_guard lock(mutex_);
  if (host < model_.size()) model_.set_up(host, up);
}

void Emulator::set_link(size_t host, const HostLink& link) {
  std::lock_guard lock(mutex_);
  if (host < model_.size()) model_.set_host(host, link);
}

EmulatorStats Emulator::stats() const {
  std::lock_guard lock(mutex_);
  EmulatorStats out = counters_;
  for (size_t i = 0; i < model_.size(); ++i) out.hosts.push_back(model_.counters(i));
  out.wall_seconds = started_ == TimePoint{} ? 0 : std::chrono::duration<double>(SystemClock::instance().now() - started_).count();
  out.cpu_seconds = cpu_clock_ ? cpu_seconds_of(*cpu_clock_) - cpu_at_start_ : cpu_at_end_;
  return out;
}

std::uint64_t Emulator::store(const std::uint8_t* data, size_t size) {
  std::uint64_t token;
  if (!free_.empty()) {
    token = free_.back();
    free_.pop_back();
  } else {
    token = packets_.size();
    packets_.emplace_back();
  }
  Packet& packet = packets_[token];
  packet.bytes.assign(data, data + size);
  packet.size = static_cast<std::uint32_t>(size);
  return token;
}

void Emulator::read_from(size_t host, TimePoint now) {
  const int fd = network_.host(host).tun_fd;
  for (int i = 0; i < kReadBurst; ++i) {
    const ssize_t n = ::read(fd, scratch_.data(), scratch_.size());
    if (n <= 0) return;  // EAGAIN: nothing more for now
    const auto info = parse_ipv4(ByteSpan(scratch_.data(), static_cast<size_t>(n)));
    const auto to = info ? network_.host_of(info->destination) : std::nullopt;
    if (!to || *to == host) {
      ++counters_.dropped_unroutable;
      continue;
    }
    if (behind_nat_[host]) nat_.note_outbound(*info, now);
    if (behind_nat_[*to] && !nat_.admits_inbound(*info, now)) {
      ++counters_.dropped_nat;
      continue;
    }
    if (packets_.size() - free_.size() >= kMaxPacketsHeld) {
      ++counters_.dropped_overflow;
      continue;
    }
    const std::uint64_t token = store(scratch_.data(), static_cast<size_t>(n));
    if (model_.send(now, static_cast<std::uint32_t>(host), static_cast<std::uint32_t>(*to),
                    static_cast<std::uint32_t>(n), token) != Drop::kNone) {
      release(token);
    }
  }
}

void Emulator::deliver_due(TimePoint now) {
  due_.clear();
  model_.take_due(now, due_);
  for (const LinkModel::Due& due : due_) {
    if (due.drop == Drop::kNone) {
      const Packet& packet = packets_[due.token];
      if (::write(network_.host(due.to).tun_fd, packet.bytes.data(), packet.size) < 0) {
        ++counters_.dropped_overflow;
      } else {
        ++counters_.packets;
        counters_.bytes += packet.size;
      }
    }
    release(due.token);
  }
}

Status Emulator::run() {
  if (wake_fd_ < 0) return error(Code::kUnavailable, "eventfd: " + std::string(std::strerror(errno)));
  Fd epoll{::epoll_create1(EPOLL_CLOEXEC)};
  Fd timer{::timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC)};
  if (epoll.fd < 0 || timer.fd < 0) return error(Code::kUnavailable, "epoll/timerfd: " + std::string(std::strerror(errno)));
  ::prctl(PR_SET_TIMERSLACK, 1UL);  // wake on time, not up to 50 µs late
  // Ahead of the peers it serves (best effort: root may): on a busy machine a packet must not wait for a
  // compiler's time slice, or the delays grow with the load. The loop blocks in epoll_wait between events,
  // so it cannot starve the machine.
  sched_param priority{};
  priority.sched_priority = 10;
  ::pthread_setschedparam(::pthread_self(), SCHED_FIFO, &priority);

  const size_t hosts = network_.hosts().size();
  auto watch = [&](int fd, std::uint64_t tag) {
    epoll_event event{};
    event.events = EPOLLIN;
    event.data.u64 = tag;
    return ::epoll_ctl(epoll.fd, EPOLL_CTL_ADD, fd, &event) == 0;
  };
  const std::uint64_t kTimerTag = hosts, kWakeTag = hosts + 1;
  for (size_t i = 0; i < hosts; ++i) {
    if (!watch(network_.host(i).tun_fd, i)) return error(Code::kUnavailable, "epoll_ctl: " + std::string(std::strerror(errno)));
  }
  if (!watch(timer.fd, kTimerTag) || !watch(wake_fd_, kWakeTag)) {
    return error(Code::kUnavailable, "epoll_ctl: " + std::string(std::strerror(errno)));
  }
  {
    std::lock_guard lock(mutex_);
    started_ = SystemClock::instance().now();
    clockid_t clock;
    if (::pthread_getcpuclockid(::pthread_self(), &clock) == 0) {
      cpu_clock_ = clock;
      cpu_at_start_ = cpu_seconds_of(clock);
    }
  }
  // This thread's CPU clock is valid only while it runs: stats() reads what it used from here on.
  struct FreezeCpuClock {
    Emulator& e;
    ~FreezeCpuClock() {
      std::lock_guard lock(e.mutex_);
      if (e.cpu_clock_) e.cpu_at_end_ = cpu_seconds_of(*e.cpu_clock_) - e.cpu_at_start_;
      e.cpu_clock_.reset();
    }
  } freeze{*this};

  std::vector<epoll_event> events(hosts + 2);
  TimePoint armed = TimePoint::max();  // when the timer fires; max: not armed
  while (!stopping_) {
    const int ready = ::epoll_wait(epoll.fd, events.data(), static_cast<int>(events.size()), 200);
    if (ready < 0 && errno != EINTR) return error(Code::kUnavailable, "epoll_wait: " + std::string(std::strerror(errno)));
    std::lock_guard lock(mutex_);
    const TimePoint now = SystemClock::instance().now();
    for (int e = 0; e < ready; ++e) {
      const std::uint64_t tag = events[e].data.u64;
      if (tag < hosts) {
        read_from(tag, now);
      } else {
        std::uint64_t drained;
        (void)!::read(tag == kTimerTag ? timer.fd : wake_fd_, &drained, sizeof drained);
        if (tag == kTimerTag) armed = TimePoint::max();
      }
    }
    deliver_due(SystemClock::instance().now());
    const auto next = model_.next_due();
    if (next && *next != armed) {
      itimerspec when{};
      const auto since_epoch = std::chrono::duration_cast<std::chrono::nanoseconds>(next->time_since_epoch()).count();
      when.it_value.tv_sec = static_cast<time_t>(since_epoch / 1000000000);
      when.it_value.tv_nsec = static_cast<long>(since_epoch % 1000000000);
      if (when.it_value.tv_sec == 0 && when.it_value.tv_nsec == 0) when.it_value.tv_nsec = 1;
      ::timerfd_settime(timer.fd, TFD_TIMER_ABSTIME, &when, nullptr);
      armed = *next;
    }
  }
  return {};
}

RunningEmulator::RunningEmulator(const LabNetwork& network, std::vector<HostLink> links, std::vector<bool> behind_nat,
                                 std::uint64_t seed)
    : emulator_(network, std::move(links), std::move(behind_nat), seed), thread_([this] {
        Status outcome = emulator_.run();
        std::lock_guard lock(mutex_);
        failure_ = outcome;
      }) {}

RunningEmulator::~RunningEmulator() {
  emulator_.stop();
  thread_.join();
}

Status RunningEmulator::failure() const {
  std::lock_guard lock(mutex_);
  return failure_;
}

}  // namespace dedloc::lab
