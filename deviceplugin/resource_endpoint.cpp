// ListAndWatch sends the shares once and then holds the stream open (the kubelet takes a closed
// stream for a dead plugin); it returns when the server stops or the kubelet hangs up. Every
// share is always healthy: what gpushare shares is time on a GPU the NVIDIA stack already
// checks, and a share has no health of its own.
#include "resource_endpoint.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <mutex>

#include "container_allocation.h"
#include "deviceplugin/v1beta1/api.grpc.pb.h"
#include "shares.h"

namespace gpushare::deviceplugin {

class DevicePluginService final : public v1beta1::DevicePlugin::Service {
 public:
  DevicePluginService(const ResourceClass& resource, const PluginOptions& options,
                      const std::vector<std::string>& gpus, AllocationStore& store)
      : resource_(resource), options_(options), gpus_(gpus), store_(store) {}

  void stop() {
    std::lock_guard lock(mutex_);
    stopping_ = true;
    changed_.notify_all();
  }

  grpc::Status GetDevicePluginOptions(grpc::ServerContext*, const v1beta1::Empty*,
                                      v1beta1::DevicePluginOptions* reply) override {
    reply->set_pre_start_required(false);
    reply->set_get_preferred_allocation_available(true);
    return grpc::Status::OK;
  }

  grpc::Status ListAndWatch(grpc::ServerContext* context, const v1beta1::Empty*,
                            grpc::ServerWriter<v1beta1::ListAndWatchResponse>* writer) override {
    v1beta1::ListAndWatchResponse list;
    for (const auto& id : share_ids(gpus_, resource_.shares_per_gpu)) {
      v1beta1::Device* device = list.add_devices();
      device->set_id(id);
      device->set_health("Healthy");
    }
    if (!writer->Write(list)) return grpc::Status::OK;
    spdlog::info("{}: sent {} shares on {} GPUs", resource_.resource, list.devices_size(),
                 gpus_.size());
    std::unique_lock lock(mutex_);
    while (!stopping_ && !context->IsCancelled())
      changed_.wait_for(lock, std::chrono::milliseconds(100));
    return grpc::Status::OK;
  }

  grpc::Status GetPreferredAllocation(grpc::ServerContext*,
                                      const v1beta1::PreferredAllocationRequest* request,
                                      v1beta1::PreferredAllocationResponse* reply) override {
    for (const auto& r : request->container_requests()) {
      std::vector<std::string> available(r.available_deviceids().begin(),
                                         r.available_deviceids().end());
      std::vector<std::string> must(r.must_include_deviceids().begin(),
                                    r.must_include_deviceids().end());
      auto* out = reply->add_container_responses();
      for (const auto& id : preferred_shares(available, must, r.allocation_size()))
        out->add_deviceids(id);
    }
    return grpc::Status::OK;
  }

  grpc::Status Allocate(grpc::ServerContext*, const v1beta1::AllocateRequest* request,
                        v1beta1::AllocateResponse* reply) override {
    for (const auto& r : request->container_requests()) {
      std::vector<std::string> ids(r.devices_ids().begin(), r.devices_ids().end());
      ShareGpus gpus = gpus_of_shares(ids, gpus_, resource_.shares_per_gpu);
      if (!gpus.error.empty()) {
        spdlog::warn("{}: refuse allocate [{}]: {}", resource_.resource, joined(ids), gpus.error);
        return {grpc::StatusCode::INVALID_ARGUMENT, gpus.error};
      }
      std::string error;
      auto token = store_.add(resource_.resource, ids, &error);
      if (!token) {
        spdlog::error("{}: allocate [{}]: cannot record the allocation: {}", resource_.resource,
                      joined(ids), error);
        return {grpc::StatusCode::INTERNAL, "cannot record the allocation: " + error};
      }
      ContainerAllocation a =
          container_allocation(options_.allocation, resource_.priority, gpus.gpus, *token);
      auto* out = reply->add_container_responses();
      for (const auto& [name, value] : a.envs) (*out->mutable_envs())[name] = value;
      for (const auto& m : a.mounts) {
        auto* mount = out->add_mounts();
        mount->set_container_path(m.container_path);
        mount->set_host_path(m.host_path);
        mount->set_read_only(m.read_only);
      }
      for (const auto& name : a.cdi_devices) out->add_cdi_devices()->set_name(name);
      spdlog::info("{}: allocate [{}] gpus={} token={}", resource_.resource, joined(ids),
                   joined(gpus.gpus), *token);
    }
    return grpc::Status::OK;
  }

  grpc::Status PreStartContainer(grpc::ServerContext*, const v1beta1::PreStartContainerRequest*,
                                 v1beta1::PreStartContainerResponse*) override {
    return grpc::Status::OK;
  }

 private:
  const ResourceClass& resource_;
  const PluginOptions& options_;
  const std::vector<std::string>& gpus_;
  AllocationStore& store_;
  std::mutex mutex_;
  std::condition_variable changed_;
  bool stopping_ = false;
};

ResourceEndpoint::ResourceEndpoint(ResourceClass resource, const PluginOptions& options,
                                   std::vector<std::string> gpus, AllocationStore& store)
    : resource_(std::move(resource)), options_(options), gpus_(std::move(gpus)), store_(store) {}

ResourceEndpoint::~ResourceEndpoint() {
  stop();
}

std::string ResourceEndpoint::socket_path() const {
  return options_.device_plugin_dir + "/" + resource_.endpoint;
}

bool ResourceEndpoint::serve(std::string* error) {
  stop();
  ::unlink(socket_path().c_str());
  service_ = std::make_unique<DevicePluginService>(resource_, options_, gpus_, store_);
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("unix:" + socket_path(), grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(service_.get());
  server_ = builder.BuildAndStart();
  if (!server_) {
    service_.reset();
    return *error = "cannot listen on " + socket_path(), false;
  }
  return true;
}

void ResourceEndpoint::stop() {
  if (!server_) return;
  service_->stop();
  server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  server_->Wait();
  server_.reset();
  service_.reset();
}

bool ResourceEndpoint::register_with_kubelet(std::string* error) {
  auto channel = grpc::CreateChannel("unix:" + options_.device_plugin_dir + "/kubelet.sock",
                                     grpc::InsecureChannelCredentials());
  auto stub = v1beta1::Registration::NewStub(channel);
  v1beta1::RegisterRequest request;
  request.set_version("v1beta1");
  request.set_endpoint(resource_.endpoint);
  request.set_resource_name(resource_.resource);
  request.mutable_options()->set_get_preferred_allocation_available(true);
  v1beta1::Empty reply;
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  grpc::Status status = stub->Register(&context, request, &reply);
  if (!status.ok()) return *error = status.error_message(), false;
  return true;
}

}  // namespace gpushare::deviceplugin
