// SPDX-License-Identifier: MIT
#include "torch_backend/group.h"

#include <c10/util/Exception.h>
#include <torch/csrc/distributed/c10d/GroupRegistry.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/symm_mem/SymmetricMemory.hpp>

#include <cstdlib>

#include "mori/runtime.h"
#include "torch_backend/device.h"
#include "torch_backend/plugins.h"
#include "torch_backend/store_bootstrap.h"

namespace mori_torch {

Group::~Group() {
  mori_coll_destroy(coll);
  if (comm && mori_comm_destroy(comm) != 0) TORCH_WARN("MORI group '", name, "': ", mori_last_error());
  mori_device_free(device, rank_to_global_dev);
  mori_bootstrap_destroy(bootstrap);
}

mori_coll_t *Group::Coll(size_t workspace, bool capturing) {
  if (!coll) {
    TORCH_CHECK(!capturing, "MORI: the first collective op of group '", name,
                "' creates its workspace, which cannot happen during CUDA-graph capture: run the op once before capturing");
    mori_coll_attr_t attr;
    mori_coll_attr_init(&attr);
    attr.workspace_bytes = workspace;
    int rc = mori_coll_create(comm, &attr, &coll);
    TORCH_CHECK(rc == 0, "MORI group '", name, "': collective workspace: ", mori_last_error());
  }
  if (mori_coll_workspace_bytes(coll) < workspace) {
    TORCH_CHECK(!capturing, "MORI: group '", name, "' needs its collective workspace to grow to ", workspace,
                " bytes, which cannot happen during CUDA-graph capture: run the op at this size once before capturing");
    int rc = mori_coll_reserve(coll, workspace);
    TORCH_CHECK(rc == 0, "MORI group '", name, "': growing the collective workspace: ", mori_last_error());
  }
  return coll;
}

Groups::Base::~Base() { mori_bootstrap_destroy(bootstrap); }

Groups::Base &Groups::BaseOf(const std::string &name) {
  auto it = bases_.find(name);
  if (it != bases_.end()) return *it->second;
  auto b = std::make_unique<Base>();
  try {
    auto &info = c10d::symmetric_memory::get_group_info(name);
    b->rank = info.rank;
    b->size = info.world_size;
    b->store = info.store;
  } catch (const std::exception &) {
    auto pg = c10d::resolve_process_group(name);
    TORCH_CHECK(pg, "MORI: unknown group '", name, "'");
    b->rank = pg->getRank();
    b->size = pg->getSize();
    b->store = pg->getStore();
  }
  int rc = CreateStoreBootstrap(b->store, name + "/base", b->rank, b->size, &b->bootstrap);
  TORCH_CHECK(rc == 0, "MORI group '", name, "' (rank ", b->rank, " of ", b->size, "): ", mori_last_error());
  // Global ranks: RANK from the launcher, else the rank in this group.
  const char *env_rank = std::getenv("RANK");
  int32_t global = env_rank ? std::atoi(env_rank) : b->rank;
  b->rank_to_global.resize(b->size);
  rc = mori_bootstrap_allgather(b->bootstrap, &global, b->rank_to_global.data(), sizeof(int32_t));
  TORCH_CHECK(rc == 0, "MORI group '", name, "': ", mori_last_error());
  return *bases_.emplace(name, std::move(b)).first->second;
}

Group &Groups::Make(const std::string &name, Base &base, const std::vector<int> &devices, int device) {
  auto g = std::make_unique<Group>();  // releases whatever is made if a step throws
  g->name = name;
  g->device = device;
  g->rank_to_global = base.rank_to_global;
  int instance = base.made++;
  int rc = CreateStoreBootstrap(base.store, name + "/" + std::to_string(instance), base.rank, base.size, &g->bootstrap);
  TORCH_CHECK(rc == 0, "MORI group '", name, "' (rank ", base.rank, " of ", base.size, "): ", mori_last_error());
  // The local transports route the peers first (plugins.h); the others are
  // optional: the comm opens them only when some rank has a peer the local
  // ones do not reach (a group that spans nodes), in the same creation.
  // Single-node groups never open a NIC or register memory with one.
  mori_comm_attr_t attr;
  mori_comm_attr_init(&attr);
  attr.bootstrap = g->bootstrap;
  attr.device = device;
  attr.handles = kHandles;
  attr.num_handles = (int)kNumHandles;
  attr.transports = kTransports;
  attr.num_transports = (int)kNumTransports;
  for (size_t t = kLocalTransports; t < kNumTransports; t++) attr.optional_transports |= 1u << t;
  rc = mori_comm_create(&attr, &g->comm);
  TORCH_CHECK(rc == 0, "MORI group '", name, "' (rank ", base.rank, " of ", base.size, ", cuda:", device, "): ",
              mori_last_error());
  size_t bytes = g->rank_to_global.size() * sizeof(int);
  rc = mori_device_alloc(device, bytes, (void **)&g->rank_to_global_dev);
  if (!rc) rc = mori_device_copy(device, g->rank_to_global_dev, g->rank_to_global.data(), bytes);
  TORCH_CHECK(rc == 0, "MORI group '", name, "': ", mori_last_error());
  return *groups_.emplace(std::make_pair(name, devices), std::move(g)).first->second;
}

Group &Groups::Get(const std::string &name, int device, bool agree) {
  auto cur = current_.find({name, device});
  if (!agree && cur != current_.end()) return *cur->second;
  Base &base = BaseOf(name);
  std::vector<int> devices(base.size);
  int32_t mine = device;
  // Every rank of the group has the same history of agreements, so the
  // same last communicator (or none, the first time).
  auto last = last_.find(name);
  int rc = last != last_.end() ? mori_comm_allgather(last->second->comm, &mine, devices.data(), sizeof(int32_t))
                               : mori_bootstrap_allgather(base.bootstrap, &mine, devices.data(), sizeof(int32_t));
  TORCH_CHECK(rc == 0, "MORI group '", name, "': agreeing on the devices: ", mori_last_error());
  auto it = groups_.find({name, devices});
  Group &g = it != groups_.end() ? *it->second : Make(name, base, devices, device);
  current_[{name, device}] = &g;
  last_[name] = &g;
  return g;
}

Group *Groups::Find(const std::string &name, int device) const {
  auto cur = current_.find({name, device});
  return cur != current_.end() ? cur->second : nullptr;
}

// Why trying the last communicator first cannot make ranks diverge:
//  - every rank comes here in the same rendezvous (torch's rendezvous is
//    collective over the group) with the same history of agreements, so
//    every rank tries the same communicator, or none (the group's first);
//  - a window's creation succeeds on every rank or fails on every rank:
//    all ranks judge the same gathered records, and nothing after that can
//    fail on one rank alone (core/window.c). So every rank takes the same
//    branch below: done, or the agreement exactly as before the try;
//  - the try succeeds only when each rank's memory is on the device its
//    comm has in that communicator (the records carry both; a rank whose
//    device changed fails it on every rank, core/rendezvous.c), that is
//    when each rank passes the device it passed at the last agreement: the
//    allgather would have found the same communicator.
// A failure of any other kind is retried once after the agreement, which
// reports it (the second try fails alike, on every rank).
int Groups::CreateWindow(const std::string &name, int device, void *ptr, Group **group, mori_window_t **out) {
  auto last = last_.find(name);
  if (last != last_.end()) {
    Group &g = *last->second;
    c10::DeviceGuard guard(GpuDevice(g.device));
    if (mori_window_create(g.comm, ptr, out) == 0) {
      *group = &g;
      return 0;
    }
  }
  Group &g = Get(name, device, /*agree=*/true);
  c10::DeviceGuard guard(GpuDevice(g.device));
  *group = &g;
  return mori_window_create(g.comm, ptr, out);
}

void Groups::ReleaseColls() {
  for (auto &entry : groups_) {
    mori_coll_destroy(entry.second->coll);
    entry.second->coll = nullptr;
  }
}

void Groups::ReleaseAll() {
  current_.clear();
  last_.clear();
  groups_.clear();
  bases_.clear();
}

}  // namespace mori_torch
