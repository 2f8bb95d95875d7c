// SPDX-License-Identifier: MIT
// What the rest of the backend uses of the allocator: the (group, device)
// communicators it keeps.
#pragma once

#include <memory>
#include <string>

#include "torch_backend/group.h"
#include "torch_backend/symmetric_memory.h"

namespace mori_torch {

// The communicator of `name` on `device` (created collectively on first use).
// Throws a c10::Error naming the group and the cause.
Group &GroupFor(const std::string &name, int device);
// The group's communicator on `device` if one was made, else nullptr
// (never a collective step).
Group *ExistingGroupFor(const std::string &name, int device);
// The window of `ptr` (mori memory on `device`) over group `name`, made as a
// rendezvous makes it (Groups::CreateWindow): mori_window_create's code, its
// message in mori_last_error(); *group is the communicator's group.
// Collective; throws a c10::Error when the group's agreement fails.
int CreateWindow(const std::string &name, int device, void *ptr, Group **group, mori_window_t **out);

// The window of the MORI allocation holding `ptr`, rendezvoused on group
// `name` on `device`, and ptr's offset in it; null when there is none (not
// MORI memory, or never rendezvoused on that group). Never collective.
std::shared_ptr<WindowState> WindowOf(const void *ptr, const std::string &name, int device, size_t *offset);

}  // namespace mori_torch
