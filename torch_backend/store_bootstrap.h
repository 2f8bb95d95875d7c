// A mori bootstrap carried by a torch c10d::Store: the group's store is
// already there, so the torch backend needs no sockets of its own. Keys are
// "mori/<group>/<seq>/<rank>"; one sequence counter per group, so subgroups
// never desync. Every wait is bounded and names the ranks that are missing.
#pragma once

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <string>

#include "mori/bootstrap.h"

namespace mori_torch {

// Creates a bootstrap for `group` (rank/size of this process in it).
int CreateStoreBootstrap(const c10::intrusive_ptr<c10d::Store> &store, const std::string &group, int rank, int size,
                         mori_bootstrap_t **out);

}  // namespace mori_torch
