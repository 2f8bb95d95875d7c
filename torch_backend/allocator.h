// What the rest of the backend uses of the allocator: the (group, device)
// communicators it keeps.
#pragma once

#include <string>

#include "torch_backend/group.h"

namespace mori_torch {

// The communicator of `name` on `device` (created collectively on first use).
// Throws a c10::Error naming the group and the cause.
Group &GroupFor(const std::string &name, int device);

}  // namespace mori_torch
