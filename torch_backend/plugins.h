// SPDX-License-Identifier: MIT
// The plug-ins the backend's comms are made with, in one place: group.cc
// hands these lists to mori_comm_create, and the build info names exactly
// them (build_info.h), so the two cannot drift apart.
#pragma once

#include <cstddef>

#include "mori/plugin.h"

namespace mori_torch {

// Handle libraries, in the order mori tries them.
extern const mori_handle_ops_t *const kHandles[];
extern const size_t kNumHandles;

// Transports: the first kLocalTransports for every group (load/store
// peers); the rest are optional (mori_comm_attr_t.optional_transports),
// opened only for a group that spans nodes (its other nodes' peers), so a
// single-node group never opens a NIC.
extern const mori_transport_ops_t *const kTransports[];
extern const size_t kNumTransports;
extern const size_t kLocalTransports;

}  // namespace mori_torch
