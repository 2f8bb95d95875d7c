// SPDX-License-Identifier: MIT
// One communicator per (group, device): created at the group's first
// rendezvous or collective op on that device, kept for the life of the
// process (its store keys count on from where they were), released at
// finalization. A group used on several devices (torch allows every rank on
// one device, TORCH_SYMM_MEM_ALLOW_OVERLAPPING_DEVICES) gets one per device.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "mori/collectives.h"
#include "mori/comm.h"
#include "mori/window.h"

#include <torch/csrc/distributed/c10d/Store.hpp>

namespace mori_torch {

struct Group {
  std::string name;
  int device = -1;
  mori_bootstrap_t *bootstrap = nullptr;
  mori_comm_t *comm = nullptr;
  std::vector<int> rank_to_global;
  int *rank_to_global_dev = nullptr;
  mori_coll_t *coll = nullptr;  // the collective ops' context, made at the first op

  ~Group();
  // The collective context with at least `workspace` bytes of staging.
  // Collective on first use and when it grows. `capturing`: growth is
  // impossible (it would allocate inside a CUDA-graph capture).
  mori_coll_t *Coll(size_t workspace, bool capturing);
};

class Groups {
 public:
  // The communicator of group `name` whose ranks are on the devices every
  // rank passes as `device` (agreed with one allgather over the group's
  // store, so that every rank picks the same communicator even when the
  // devices change between calls; a new device set makes a new one). With
  // `agree` false, the communicator last agreed for (name, device) is used
  // without a round trip (collective ops call this every time). Throws a
  // c10::Error naming the group and the cause. Caller holds the backend's lock.
  Group &Get(const std::string &name, int device, bool agree);
  // The communicator Get(name, device, false) would return when one was
  // agreed already, else nullptr: no collective step, ever.
  Group *Find(const std::string &name, int device) const;
  // The window of `ptr` (mori memory on `device`) over group `name`, on the
  // communicator Get(name, device, true) would pick, without its device
  // allgather when the devices are those of the group's last agreement:
  // the window's own rendezvous checks them (below). Collective. Returns
  // mori_window_create's code (its message in mori_last_error()) and sets
  // *group; throws a c10::Error when the agreement itself fails.
  int CreateWindow(const std::string &name, int device, void *ptr, Group **group, mori_window_t **out);
  // Collective contexts first (they are windows), then the comms.
  void ReleaseColls();
  void ReleaseAll();

 private:
  // What a group has whatever its devices: its store, ranks, and a
  // bootstrap for agreeing on devices.
  struct Base {
    mori_bootstrap_t *bootstrap = nullptr;
    int rank = -1, size = 0;
    c10::intrusive_ptr<c10d::Store> store;
    std::vector<int> rank_to_global;
    int made = 0;  // communicators made so far: names the next one's store scope
    ~Base();
  };
  Base &BaseOf(const std::string &name);
  Group &Make(const std::string &name, Base &base, const std::vector<int> &devices, int device);

  std::map<std::string, std::unique_ptr<Base>> bases_;
  std::map<std::pair<std::string, std::vector<int>>, std::unique_ptr<Group>> groups_;
  std::map<std::pair<std::string, int>, Group *> current_;
  // The communicator a group last agreed on: the next window is tried on it
  // first (CreateWindow), and the next agreement goes over its node channel
  // (microseconds) instead of the store (milliseconds).
  std::map<std::string, Group *> last_;
};

}  // namespace mori_torch
