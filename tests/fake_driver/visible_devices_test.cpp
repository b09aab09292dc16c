// CUDA_VISIBLE_DEVICES as the fake driver reads it (visible_devices.h): the real driver's rules.
#include "visible_devices.h"

#include <gtest/gtest.h>

#include "simulated_uuid.h"

namespace gpushare::fake {
namespace {

using Devices = std::vector<int>;

std::vector<protocol::DeviceUuid> three_devices() {
  return {device_uuid(0), device_uuid(1), device_uuid(2)};
}

TEST(VisibleDevices, UnsetShowsEveryDeviceInPhysicalOrder) {
  EXPECT_EQ(visible_devices(nullptr, three_devices()), (Devices{0, 1, 2}));
}

TEST(VisibleDevices, IndicesListTheDevicesInTheirOrder) {
  EXPECT_EQ(visible_devices("1", three_devices()), (Devices{1}));
  EXPECT_EQ(visible_devices("2,0", three_devices()), (Devices{2, 0}));
  EXPECT_EQ(visible_devices(" 1 , 2 ", three_devices()), (Devices{1, 2}));
}

TEST(VisibleDevices, TheListEndsAtTheFirstEntryThatNamesNoDevice) {
  EXPECT_EQ(visible_devices("0,7,1", three_devices()), (Devices{0}));
  EXPECT_EQ(visible_devices("1,-1,0", three_devices()), (Devices{1}));
  EXPECT_EQ(visible_devices("1,1,0", three_devices()), (Devices{1}));  // named twice
  EXPECT_EQ(visible_devices("1,x", three_devices()), (Devices{1}));
  EXPECT_EQ(visible_devices("", three_devices()), Devices{});
  EXPECT_EQ(visible_devices("-1", three_devices()), Devices{});
}

TEST(VisibleDevices, AUuidOrAUniquePrefixOfItNamesItsDevice) {
  const std::string one = device_uuid_text(1);
  EXPECT_EQ(visible_devices(one.c_str(), three_devices()), (Devices{1}));
  EXPECT_EQ(visible_devices((one + ",0").c_str(), three_devices()), (Devices{1, 0}));
  EXPECT_EQ(visible_devices(one.substr(0, 8).c_str(), three_devices()), (Devices{1}));
  std::string upper = one;
  for (size_t i = 4; i < upper.size(); ++i) upper[i] = static_cast<char>(std::toupper(upper[i]));
  EXPECT_EQ(visible_devices(upper.c_str(), three_devices()), (Devices{1}));
}

TEST(VisibleDevices, AnUnknownAmbiguousOrMigEntryNamesNoDevice) {
  EXPECT_EQ(visible_devices("GPU-", three_devices()), Devices{});  // every UUID matches
  EXPECT_EQ(visible_devices("GPU-00000000-1111-2222-3333-444444444444", three_devices()),
            Devices{});
  EXPECT_EQ(visible_devices(("0," + device_uuid_text(7)).c_str(), three_devices()), (Devices{0}));
  EXPECT_EQ(visible_devices("MIG-5e83a8cd-f2b4-4e51-a1c0-7ba3d2e0ff11", three_devices()),
            Devices{});
}

TEST(SimulatedUuid, DevicesHaveDistinctUuidsThatRoundTripThroughText) {
  EXPECT_NE(device_uuid(0), device_uuid(1));
  EXPECT_EQ(protocol::parse_device_uuid(device_uuid_text(1)), device_uuid(1));
  EXPECT_EQ(device_uuid_text(0).size(), 40u);
}

}  // namespace
}  // namespace gpushare::fake
