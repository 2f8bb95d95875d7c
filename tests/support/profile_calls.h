// SPDX-License-Identifier: MIT
// How many calls of one mori/profile.h kind were counted since the last
// mori_profile_reset (0 when none).
#ifndef MORI_TESTS_SUPPORT_PROFILE_CALLS_H
#define MORI_TESTS_SUPPORT_PROFILE_CALLS_H

#include <stdint.h>

#include <cstring>

#include "mori/profile.h"

namespace mori_test {

inline uint64_t ProfileCalls(const char *kind) {
  mori_profile_entry_t e[MORI_PROFILE_KINDS];
  int n = mori_profile_read(e, MORI_PROFILE_KINDS);
  for (int i = 0; i < n; i++)
    if (std::strcmp(e[i].name, kind) == 0) return e[i].calls;
  return 0;
}

}  // namespace mori_test

#endif
