// The shares the plugin advertises. Each GPU is cut into N shares of a class's extended resource
// (gpushare.io/production, gpushare.io/opportunistic); a share's device id names its GPU, so the
// kubelet's choice of ids says which GPUs a container gets:
//
//   "<gpu>-s<k>"   gpu: a UUID ("GPU-fef8089b-…") or an index ("0"); k: 0..N-1
//
// Ids stay the same across plugin restarts as long as the GPUs keep their UUIDs, which is what
// the kubelet's checkpoint of past allocations relies on.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpushare::deviceplugin {

std::string share_id(std::string_view gpu, int share);

// The GPU of a share id, or none when the id is not "<gpu>-s<k>" with a number k.
std::optional<std::string> gpu_of_share(std::string_view id);

// Every share of every GPU, GPU by GPU.
std::vector<std::string> share_ids(const std::vector<std::string>& gpus, int shares_per_gpu);

struct ShareGpus {
  std::vector<std::string> gpus;  // the GPUs the shares are on, each once, in `known` order
  std::string error;              // non-empty: an id that is not one of `known`'s shares
};
// The GPUs that `ids` belong to; every id must be one of the shares of `known` GPUs.
ShareGpus gpus_of_shares(const std::vector<std::string>& ids, const std::vector<std::string>& known,
                         int shares_per_gpu);

// GetPreferredAllocation: `size` ids from `available`, `must_include` first. A container's
// shares are kept on as few GPUs as possible (each GPU it touches is one more device its
// processes open), starting with the GPUs of `must_include`, then the GPU with the most free
// shares, so containers spread over the node's GPUs. Fewer than `size` when `available` has
// fewer; deterministic for the same input.
std::vector<std::string> preferred_shares(const std::vector<std::string>& available,
                                          const std::vector<std::string>& must_include, int size);

}  // namespace gpushare::deviceplugin
