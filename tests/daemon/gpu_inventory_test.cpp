// Placing a shim's devices by UUID (daemon/gpu_inventory.h).
#include "gpu_inventory.h"

#include <gtest/gtest.h>

#include <cstring>

#include "device_uuids.h"

namespace gpushare::daemon {
namespace {

TEST(GpuInventory, PlacesEachOrdinalByItsUuidAndMarksUnknownOnes) {
  GpuInventory inventory;
  inventory.index_of = {{uuid_of(10), 0}, {uuid_of(50), 1}};
  protocol::DeviceMap map =
      place_devices(inventory, asking({uuid_of(50), uuid_of(10), uuid_of(99)}));
  ASSERT_EQ(map.count, 3u);
  EXPECT_EQ(map.physical[0], 1);
  EXPECT_EQ(map.physical[1], 0);
  EXPECT_EQ(map.physical[2], protocol::kUnknownDevice);
}

TEST(GpuInventory, ChecksTheShimsMessage) {
  EXPECT_EQ(check_device_uuids(asking({uuid_of(1)})), "");
  EXPECT_NE(check_device_uuids(asking({})), "");
  protocol::DeviceUuids m = asking({uuid_of(1)});
  m.count = protocol::kMaxDevices + 1;
  EXPECT_NE(check_device_uuids(m), "");
  m = asking({uuid_of(1)});
  m.reserved = 1;
  EXPECT_NE(check_device_uuids(m), "");
  m = asking({uuid_of(1)});
  m.uuids[5][3] = 7;  // past the count
  EXPECT_NE(check_device_uuids(m), "");
}

TEST(DeviceUuidText, RoundTripsAndRefusesOtherForms) {
  char text[protocol::kDeviceUuidTextSize];
  protocol::format_device_uuid(uuid_of(0xa0), text);
  EXPECT_STREQ(text, "GPU-a0a1a2a3-a4a5-a6a7-a8a9-aaabacadaeaf");
  EXPECT_EQ(protocol::parse_device_uuid(text), uuid_of(0xa0));
  EXPECT_EQ(protocol::parse_device_uuid("GPU-A0A1A2A3-A4A5-A6A7-A8A9-AAABACADAEAF"), uuid_of(0xa0));
  EXPECT_FALSE(protocol::parse_device_uuid("MIG-a0a1a2a3-a4a5-a6a7-a8a9-aaabacadaeaf"));
  EXPECT_FALSE(protocol::parse_device_uuid("GPU-a0a1a2a3"));
  EXPECT_FALSE(protocol::parse_device_uuid("GPU-a0a1a2a3a-4a5-a6a7-a8a9-aaabacadaeaf"));
}

}  // namespace
}  // namespace gpushare::daemon
