// The process's context (shim_context.h). Apart from the rest so that the tests, which build
// contexts of their own, link gate.cpp and in_flight.cpp without the real driver's resolution.
#include "shim_context.h"

namespace gpushare::shim {

constinit ShimContext g_shim{&driver_calls};

}  // namespace gpushare::shim
