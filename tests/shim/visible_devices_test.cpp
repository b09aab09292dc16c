// The shim's table of physical devices (shim/visible_devices.h): the numeric fallback and the
// daemon's answer by UUID.
#include "visible_devices.h"

#include <gtest/gtest.h>

#include <vector>

namespace gpushare::shim {
namespace {

std::vector<int> listed(const DeviceTable& t) {
  return {t.physical, t.physical + t.count};
}

TEST(NumericVisibleDevices, AListOfIndicesIsTakenAsPhysicalDevices) {
  EXPECT_EQ(listed(numeric_visible_devices("2,3")), (std::vector<int>{2, 3}));
  EXPECT_EQ(listed(numeric_visible_devices("1")), (std::vector<int>{1}));
}

TEST(NumericVisibleDevices, AnythingElseIsLeftToTheDaemon) {
  EXPECT_EQ(numeric_visible_devices(nullptr).count, 0u);
  EXPECT_EQ(numeric_visible_devices("").count, 0u);
  EXPECT_EQ(numeric_visible_devices("GPU-5e83a8cd-f2b4-4e51-a1c0-7ba3d2e0ff11").count, 0u);
  EXPECT_EQ(numeric_visible_devices("0,GPU-5e83").count, 0u);
  EXPECT_EQ(numeric_visible_devices("-1").count, 0u);
  EXPECT_EQ(numeric_visible_devices("1024").count, 0u);
}

protocol::DeviceMap map_of(std::vector<int32_t> physical) {
  protocol::DeviceMap map{};
  map.count = static_cast<uint32_t>(physical.size());
  for (size_t i = 0; i < physical.size(); ++i) map.physical[i] = physical[i];
  return map;
}

TEST(ResolvedDevices, TheDaemonsPlacesWinWhenItPlacedEveryOrdinal) {
  DeviceTable fallback = numeric_visible_devices("0,1");
  int unplaced = 0;
  DeviceTable t = resolved_devices(map_of({1, 0}), 2, fallback, &unplaced);
  EXPECT_EQ(listed(t), (std::vector<int>{1, 0}));
  EXPECT_EQ(unplaced, -1);
}

TEST(ResolvedDevices, AnUnplacedOrdinalKeepsTheFallbackAndIsNamed) {
  DeviceTable fallback = numeric_visible_devices("3");
  int unplaced = -1;
  DeviceTable t = resolved_devices(map_of({2, protocol::kUnknownDevice}), 2, fallback, &unplaced);
  EXPECT_EQ(listed(t), (std::vector<int>{3}));
  EXPECT_EQ(unplaced, 1);
  // An answer for another number of ordinals is not trusted either.
  t = resolved_devices(map_of({2}), 2, DeviceTable{}, &unplaced);
  EXPECT_EQ(t.count, 0u);
  EXPECT_EQ(unplaced, 0);
}

TEST(DeviceTableInForce, OrdinalsBeyondTheTableAreTheirOwnIndex) {
  set_device_table(numeric_visible_devices("5,4"));
  EXPECT_EQ(physical_device(0), 5);
  EXPECT_EQ(physical_device(1), 4);
  EXPECT_EQ(physical_device(2), 2);
  set_device_table(DeviceTable{});
  EXPECT_EQ(physical_device(0), 0);
}

}  // namespace
}  // namespace gpushare::shim
