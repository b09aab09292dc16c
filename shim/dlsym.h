// The real dlsym (glibc's), found with dlvsym so that our own dlsym override is skipped.
#pragma once

namespace gpushare::shim {
using DlsymFn = void* (*)(void*, const char*);
DlsymFn real_dlsym();
}  // namespace gpushare::shim
