// One extended resource on the kubelet's side: the DevicePlugin gRPC service on its own socket in
// the device-plugins folder, and its registration with the kubelet. The decisions it serves are
// in shares.h and container_allocation.h; this file is the glue.
#pragma once

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>
#include <vector>

#include "allocation_store.h"
#include "plugin_options.h"

namespace gpushare::deviceplugin {

class DevicePluginService;

class ResourceEndpoint {
 public:
  ResourceEndpoint(ResourceClass resource, const PluginOptions& options,
                   std::vector<std::string> gpus, AllocationStore& store);
  ~ResourceEndpoint();

  // (Re)creates the socket and serves on it; false with *error when it cannot listen.
  bool serve(std::string* error);
  void stop();
  // Register with the kubelet at <device-plugins dir>/kubelet.sock; false with *error.
  bool register_with_kubelet(std::string* error);

  std::string socket_path() const;
  const ResourceClass& resource() const { return resource_; }

 private:
  ResourceClass resource_;
  const PluginOptions& options_;
  std::vector<std::string> gpus_;
  AllocationStore& store_;
  std::unique_ptr<DevicePluginService> service_;
  std::unique_ptr<grpc::Server> server_;
};

}  // namespace gpushare::deviceplugin
