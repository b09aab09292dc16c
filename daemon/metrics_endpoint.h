// /metrics over HTTP (cpp-httplib), on threads of its own. The event loop calls publish() once a
// tick with a finished snapshot; a scrape formats the latest one. The only thing the two sides
// share is a shared_ptr swapped under a mutex, held for a pointer copy: a slow or stuck scraper
// holds its own copy and never delays a tick.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "metrics_config.h"
#include "metrics_snapshot.h"

namespace httplib {
class Server;
}

namespace gpushare::daemon {

class MetricsEndpoint {
 public:
  MetricsEndpoint();
  ~MetricsEndpoint();  // stops serving and joins the thread
  MetricsEndpoint(const MetricsEndpoint&) = delete;
  MetricsEndpoint& operator=(const MetricsEndpoint&) = delete;

  // Binds and starts serving; false and `error` when it cannot bind.
  bool start(const MetricsListen& listen, std::string* error);
  bool serving() const { return thread_.joinable(); }
  const std::string& address() const { return address_; }  // as configured, once serving
  void publish(MetricsSnapshot snapshot);
  void stop();

 private:
  std::shared_ptr<const MetricsSnapshot> latest() const;

  std::unique_ptr<httplib::Server> http_;
  std::thread thread_;
  std::atomic<bool> finished_{false};  // listen_after_bind() returned
  std::string address_;
  std::string unix_path_;  // removed on stop
  mutable std::mutex mutex_;
  std::shared_ptr<const MetricsSnapshot> latest_;
};

}  // namespace gpushare::daemon
