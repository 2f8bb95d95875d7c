// SPDX-License-Identifier: MIT
// A mori bootstrap carried by a torch c10d::Store: the group's store is
// already there, so the torch backend needs no sockets of its own. Keys are
// "mori/<group>/<instance>/<seq>/<rank>"; one sequence counter per
// communicator, so subgroups never desync. Every wait is bounded and names the
// ranks that are missing. Keys do not pile up: once every rank has reached
// an allgather, every earlier step has been read by everyone, and each rank
// deletes the keys it wrote before it.
#pragma once

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <string>

#include "mori/bootstrap.h"

namespace mori_torch {

// Creates a bootstrap for `scope` (the same string on every rank, e.g.
// "<group>/<instance>"; rank/size of this process in the group).
int CreateStoreBootstrap(const c10::intrusive_ptr<c10d::Store> &store, const std::string &scope, int rank, int size,
                         mori_bootstrap_t **out);

}  // namespace mori_torch
