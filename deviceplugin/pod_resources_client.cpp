#include "pod_resources_client.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>

#include "podresources/v1/api.grpc.pb.h"

namespace gpushare::deviceplugin {

std::optional<std::vector<PodContainer>> list_pod_resources(
    const std::string& socket, const std::vector<std::string>& resources, std::string* error) {
  auto channel = grpc::CreateChannel("unix:" + socket, grpc::InsecureChannelCredentials());
  auto stub = v1::PodResourcesLister::NewStub(channel);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  v1::ListPodResourcesRequest request;
  v1::ListPodResourcesResponse reply;
  grpc::Status status = stub->List(&context, request, &reply);
  if (!status.ok()) return *error = status.error_message(), std::nullopt;
  std::vector<PodContainer> containers;
  for (const auto& pod : reply.pod_resources())
    for (const auto& c : pod.containers()) {
      PodContainer held{pod.namespace_(), pod.name(), c.name(), {}};
      for (const auto& d : c.devices()) {
        if (std::find(resources.begin(), resources.end(), d.resource_name()) == resources.end())
          continue;
        auto& ids = held.devices[d.resource_name()];
        ids.insert(ids.end(), d.device_ids().begin(), d.device_ids().end());
      }
      if (!held.devices.empty()) containers.push_back(std::move(held));
    }
  return containers;
}

}  // namespace gpushare::deviceplugin
