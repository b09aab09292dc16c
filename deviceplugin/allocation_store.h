// The plugin's state on the host: the token of every live allocation and the map the daemon
// reads (gpushare/protocol/pod_allocation.h), under one state folder that survives plugin
// restarts (the kubelet mounts a restarted container's token again from its checkpoint, so a
// token must outlive the plugin process). Called from gRPC threads (Allocate) and the
// PodResources refresh; one mutex.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "allocation_map.h"

namespace gpushare::deviceplugin {

class AllocationStore {
 public:
  AllocationStore(std::string state_dir, int64_t grace_seconds);

  // Creates the folders (state 0755, tokens 0700), reads the tokens a previous run left and
  // writes the map. False with *error when the folder cannot be used.
  bool open(std::string* error);

  // A new allocation: writes its token file and the map; the token file's host path, or none.
  std::optional<std::string> add(const std::string& resource,
                                 const std::vector<std::string>& devices, std::string* error);

  // PodResources' answer (none: the kubelet could not be asked). Maps, removes dead tokens and
  // rewrites the map when it changed.
  void update(const std::optional<std::vector<PodContainer>>& pods);

  std::string map_path() const;
  std::string token_dir() const;

 private:
  bool publish_locked(std::string* error);

  std::mutex mutex_;
  std::string dir_;
  int64_t grace_seconds_;
  std::vector<AllocationToken> tokens_;
  std::optional<std::vector<PodContainer>> pods_;
  std::string published_;
};

}  // namespace gpushare::deviceplugin
