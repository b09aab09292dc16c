// Files are written to a temporary name, synced and renamed, so the daemon reads either the old
// map or the new one, never half of one.
#include "allocation_store.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "gpushare/protocol/pod_allocation.h"

namespace gpushare::deviceplugin {
namespace {

namespace fs = std::filesystem;

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::optional<std::string> random_id() {
  unsigned char bytes[16];
  if (getrandom(bytes, sizeof bytes, 0) != static_cast<ssize_t>(sizeof bytes)) return std::nullopt;
  static const char* kHex = "0123456789abcdef";
  std::string id;
  for (unsigned char b : bytes) {
    id += kHex[b >> 4];
    id += kHex[b & 15];
  }
  return id;
}

bool write_atomically(const std::string& path, const std::string& text, mode_t mode,
                      std::string* error) {
  std::string temporary = path + ".tmp";
  int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, mode);
  if (fd < 0) return *error = temporary + ": " + std::strerror(errno), false;
  bool ok = ::fchmod(fd, mode) == 0 &&
            ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) &&
            ::fsync(fd) == 0;
  int saved = errno;
  ::close(fd);
  if (!ok || ::rename(temporary.c_str(), path.c_str()) != 0) {
    *error = path + ": " + std::strerror(ok ? errno : saved);
    ::unlink(temporary.c_str());
    return false;
  }
  return true;
}

bool make_dir(const std::string& path, mode_t mode, std::string* error) {
  if (::mkdir(path.c_str(), mode) != 0 && errno != EEXIST)
    return *error = path + ": " + std::strerror(errno), false;
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    return *error = path + ": not a folder", false;
  if (::chmod(path.c_str(), mode) != 0) return *error = path + ": " + std::strerror(errno), false;
  return true;
}

}  // namespace

AllocationStore::AllocationStore(std::string state_dir, int64_t grace_seconds)
    : dir_(std::move(state_dir)), grace_seconds_(grace_seconds) {}

std::string AllocationStore::map_path() const {
  return dir_ + "/" + protocol::kAllocationMapName;
}

std::string AllocationStore::token_dir() const {
  return dir_ + "/" + protocol::kAllocationTokenDir;
}

bool AllocationStore::open(std::string* error) {
  std::lock_guard lock(mutex_);
  if (!make_dir(dir_, 0755, error) || !make_dir(token_dir(), 0700, error)) return false;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(token_dir(), ec)) {
    std::string name = entry.path().filename().string();
    if (name.size() != 32 || !entry.is_regular_file()) continue;
    std::ifstream in(entry.path());
    std::stringstream text;
    text << in.rdbuf();
    if (auto token = token_from_json(name, text.str())) {
      token->last_held = unix_now();  // held until PodResources says otherwise for a grace
      tokens_.push_back(*token);
    } else
      spdlog::warn("{}: not a token this plugin wrote; left alone", entry.path().string());
  }
  if (ec) return *error = token_dir() + ": " + ec.message(), false;
  spdlog::info("{} allocation tokens from an earlier run in {}", tokens_.size(), token_dir());
  return publish_locked(error);
}

std::optional<std::string> AllocationStore::add(const std::string& resource,
                                                const std::vector<std::string>& devices,
                                                std::string* error) {
  std::lock_guard lock(mutex_);
  auto id = random_id();
  if (!id) return *error = "no random bytes for a token", std::nullopt;
  AllocationToken token{*id, resource, devices, unix_now()};
  std::string path = token_dir() + "/" + *id;
  if (!write_atomically(path, token_json(token), 0400, error)) return std::nullopt;
  tokens_.push_back(token);
  if (!publish_locked(error)) return std::nullopt;
  return path;
}

void AllocationStore::update(const std::optional<std::vector<PodContainer>>& pods) {
  std::lock_guard lock(mutex_);
  if (pods) pods_ = pods;
  std::string error;
  if (!publish_locked(&error)) spdlog::error("cannot publish the allocation map: {}", error);
}

bool AllocationStore::publish_locked(std::string* error) {
  AllocationMap map = map_allocations(tokens_, pods_, unix_now(), grace_seconds_);
  for (auto& t : tokens_)
    for (const auto& m : map.live)
      if (m.token.id == t.id) t.last_held = m.token.last_held;
  for (const auto& id : map.dead) {
    ::unlink((token_dir() + "/" + id).c_str());
    std::erase_if(tokens_, [&](const AllocationToken& t) { return t.id == id; });
    spdlog::info("allocation {} ended (no container holds its shares)", id);
  }
  std::string text = allocation_map_json(map);
  if (text == published_) return true;
  if (!write_atomically(map_path(), text, 0644, error)) return false;
  published_ = text;
  return true;
}

}  // namespace gpushare::deviceplugin
