// A job for the daemon's unit tests as registration makes it: an id from the registry, its class
// requested and granted, its devices, and a real control block (a memfd). The test adds what else
// it needs (name, peer, connection) and registers it.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "registry.h"
#include "shared_control_block.h"

namespace gpushare::daemon {

inline Job job_with_block(Registry& registry, protocol::JobClass job_class,
                          std::vector<int> devices) {
  Job job;
  job.id = registry.next_id();
  job.granted = job.requested = job_class;
  job.devices = std::move(devices);
  std::string error;
  job.block = SharedControlBlock::create(job.id, job_class, &error);
  EXPECT_TRUE(job.block.valid()) << error;
  return job;
}

}  // namespace gpushare::daemon
