#include "fake_kubelet.h"

#include <unistd.h>

#include <filesystem>

namespace gpushare::testing {

class FakeKubelet::Registration : public v1beta1::Registration::Service {
 public:
  explicit Registration(FakeKubelet& kubelet) : kubelet_(kubelet) {}
  grpc::Status Register(grpc::ServerContext*, const v1beta1::RegisterRequest* request,
                        v1beta1::Empty*) override {
    return kubelet_.on_register(*request);
  }

 private:
  FakeKubelet& kubelet_;
};

FakeKubelet::FakeKubelet(std::string device_plugin_dir) : dir(std::move(device_plugin_dir)) {
  std::filesystem::create_directories(dir);
}

FakeKubelet::~FakeKubelet() {
  if (server_) server_->Shutdown(std::chrono::system_clock::now());
}

void FakeKubelet::start() {
  service_ = std::make_unique<Registration>(*this);
  grpc::ServerBuilder builder;
  builder.AddListeningPort("unix:" + dir + "/kubelet.sock", grpc::InsecureServerCredentials());
  builder.RegisterService(service_.get());
  server_ = builder.BuildAndStart();
}

void FakeKubelet::stop_and_clear() {
  if (server_) server_->Shutdown(std::chrono::system_clock::now());
  server_.reset();
  for (const auto& entry : std::filesystem::directory_iterator(dir))
    if (entry.is_socket()) std::filesystem::remove(entry.path());
}

std::vector<v1beta1::RegisterRequest> FakeKubelet::registrations() {
  std::lock_guard lock(mutex_);
  return registrations_;
}

bool FakeKubelet::wait_for_registrations(size_t count, std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  return arrived_.wait_for(lock, timeout, [&] { return registrations_.size() >= count; });
}

void FakeKubelet::refuse_next(int n) {
  std::lock_guard lock(mutex_);
  refuse_ = n;
}

grpc::Status FakeKubelet::on_register(const v1beta1::RegisterRequest& request) {
  std::lock_guard lock(mutex_);
  if (refuse_ > 0) {
    --refuse_;
    return {grpc::StatusCode::UNAVAILABLE, "the fake kubelet is not ready"};
  }
  registrations_.push_back(request);
  arrived_.notify_all();
  return grpc::Status::OK;
}

std::unique_ptr<v1beta1::DevicePlugin::Stub> FakeKubelet::plugin(const std::string& resource) {
  std::string endpoint;
  for (const auto& r : registrations())
    if (r.resource_name() == resource) endpoint = r.endpoint();
  auto channel =
      grpc::CreateChannel("unix:" + dir + "/" + endpoint, grpc::InsecureChannelCredentials());
  return v1beta1::DevicePlugin::NewStub(channel);
}

FakePodResources::FakePodResources(std::string path) : socket(std::move(path)) {
  grpc::ServerBuilder builder;
  builder.AddListeningPort("unix:" + socket, grpc::InsecureServerCredentials());
  builder.RegisterService(this);
  server_ = builder.BuildAndStart();
}

FakePodResources::~FakePodResources() {
  if (server_) server_->Shutdown(std::chrono::system_clock::now());
}

void FakePodResources::add(const std::string& pod_namespace, const std::string& pod,
                           const std::string& container, const std::string& resource,
                           const std::vector<std::string>& ids) {
  std::lock_guard lock(mutex_);
  auto* p = answer_.add_pod_resources();
  p->set_namespace_(pod_namespace);
  p->set_name(pod);
  auto* c = p->add_containers();
  c->set_name(container);
  auto* d = c->add_devices();
  d->set_resource_name(resource);
  for (const auto& id : ids) d->add_device_ids(id);
}

int FakePodResources::lists() {
  std::lock_guard lock(mutex_);
  return lists_;
}

grpc::Status FakePodResources::List(grpc::ServerContext*, const v1::ListPodResourcesRequest*,
                                    v1::ListPodResourcesResponse* reply) {
  std::lock_guard lock(mutex_);
  *reply = answer_;
  ++lists_;
  return grpc::Status::OK;
}

std::optional<v1beta1::ListAndWatchResponse> first_list(v1beta1::DevicePlugin::Stub& plugin,
                                                        std::chrono::milliseconds timeout) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + timeout);
  context.set_wait_for_ready(true);
  auto reader = plugin.ListAndWatch(&context, v1beta1::Empty());
  v1beta1::ListAndWatchResponse list;
  bool got = reader->Read(&list);
  context.TryCancel();
  reader->Finish();
  if (!got) return std::nullopt;
  return list;
}

}  // namespace gpushare::testing
