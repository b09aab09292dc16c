#include "metrics_endpoint.h"

#include <httplib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "metrics_format.h"

namespace gpushare::daemon {
namespace {
constexpr size_t kWorkers = 4;
}

MetricsEndpoint::MetricsEndpoint() = default;

MetricsEndpoint::~MetricsEndpoint() {
  stop();
}

bool MetricsEndpoint::start(const MetricsListen& listen, std::string* error) {
  auto http = std::make_unique<httplib::Server>();
  // A worker serves one connection for as long as it is kept alive, so one worker would let a
  // scraper's keep-alive connection (Prometheus keeps one) block every other reader. A few
  // workers, and idle connections closed after a second.
  http->new_task_queue = [] { return new httplib::ThreadPool(kWorkers); };
  http->set_keep_alive_timeout(1);
  http->set_read_timeout(5, 0);
  http->set_write_timeout(5, 0);
  http->Get("/metrics", [this](const httplib::Request&, httplib::Response& response) {
    std::shared_ptr<const MetricsSnapshot> snapshot = latest();
    response.set_content(format_metrics(snapshot ? *snapshot : MetricsSnapshot{}),
                         kMetricsContentType);
  });
  http->Get("/", [](const httplib::Request&, httplib::Response& response) {
    response.set_content("gpushared: metrics at /metrics (docs/metrics.md)\n", "text/plain");
  });
  bool bound;
  if (!listen.unix_path.empty()) {
    http->set_address_family(AF_UNIX);
    ::unlink(listen.unix_path.c_str());  // a stale socket of a previous run
    bound = http->bind_to_port(listen.unix_path.c_str(), 80);
  } else {
    bound = http->bind_to_port(listen.host.c_str(), listen.port);
  }
  if (!bound) {
    *error = "cannot listen on " + listen.text + ": " + std::strerror(errno);
    return false;
  }
  http_ = std::move(http);
  unix_path_ = listen.unix_path;
  address_ = listen.text;
  finished_ = false;
  thread_ = std::thread([this, server = http_.get()] {
    server->listen_after_bind();
    finished_ = true;
  });
  return true;
}

void MetricsEndpoint::publish(MetricsSnapshot snapshot) {
  auto next = std::make_shared<const MetricsSnapshot>(std::move(snapshot));
  std::lock_guard lock(mutex_);
  latest_.swap(next);
  // `next` (the previous snapshot) is released after the lock, unless a scrape still holds it.
}

std::shared_ptr<const MetricsSnapshot> MetricsEndpoint::latest() const {
  std::lock_guard lock(mutex_);
  return latest_;
}

void MetricsEndpoint::stop() {
  if (!http_) return;
  // listen_after_bind() may not have begun yet, and httplib's stop() only stops a running server.
  for (int i = 0; i < 2000 && !http_->is_running() && !finished_; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  http_->stop();
  if (thread_.joinable()) thread_.join();
  http_.reset();
  if (!unix_path_.empty()) ::unlink(unix_path_.c_str());
  unix_path_.clear();
}

}  // namespace gpushare::daemon
