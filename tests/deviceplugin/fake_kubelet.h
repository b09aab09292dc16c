// A kubelet without a cluster, for the device plugin's tests: the Registration service on
// <device-plugins dir>/kubelet.sock (it records each Register and can refuse some), a client of a
// registered plugin's DevicePlugin service, and the PodResources service with a list the test
// sets. A restart removes every socket in the folder, as the kubelet does, and serves anew.
#pragma once

#include <grpcpp/grpcpp.h>

#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "deviceplugin/v1beta1/api.grpc.pb.h"
#include "podresources/v1/api.grpc.pb.h"

namespace gpushare::testing {

class FakeKubelet {
 public:
  explicit FakeKubelet(std::string device_plugin_dir);
  ~FakeKubelet();

  void start();
  // Stops serving and removes every socket in the folder; start() serves on a new kubelet.sock.
  void stop_and_clear();

  // The registrations so far (all of them, across restarts).
  std::vector<v1beta1::RegisterRequest> registrations();
  // Waits until at least `count` registrations arrived.
  bool wait_for_registrations(size_t count, std::chrono::milliseconds timeout);
  // The next `n` Register calls fail (a kubelet that is not ready yet).
  void refuse_next(int n);

  // A client of the plugin that registered `resource` most recently.
  std::unique_ptr<v1beta1::DevicePlugin::Stub> plugin(const std::string& resource);

  grpc::Status on_register(const v1beta1::RegisterRequest& request);

  std::string dir;

 private:
  class Registration;  // the service, one per start (a service serves one server at a time)
  std::unique_ptr<Registration> service_;
  std::mutex mutex_;
  std::condition_variable arrived_;
  std::vector<v1beta1::RegisterRequest> registrations_;
  int refuse_ = 0;
  std::unique_ptr<grpc::Server> server_;
};

class FakePodResources : public v1::PodResourcesLister::Service {
 public:
  explicit FakePodResources(std::string socket);
  ~FakePodResources() override;

  // One container holding `ids` of `resource`.
  void add(const std::string& pod_namespace, const std::string& pod, const std::string& container,
           const std::string& resource, const std::vector<std::string>& ids);
  int lists();  // how many List calls were answered

  grpc::Status List(grpc::ServerContext*, const v1::ListPodResourcesRequest*,
                    v1::ListPodResourcesResponse* reply) override;

  std::string socket;

 private:
  std::mutex mutex_;
  v1::ListPodResourcesResponse answer_;
  int lists_ = 0;
  std::unique_ptr<grpc::Server> server_;
};

// The first ListAndWatch answer of a plugin (none within the timeout).
std::optional<v1beta1::ListAndWatchResponse> first_list(v1beta1::DevicePlugin::Stub& plugin,
                                                        std::chrono::milliseconds timeout);

}  // namespace gpushare::testing
