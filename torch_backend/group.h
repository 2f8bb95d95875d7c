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
  // Throws a c10::Error naming the group and the cause. Caller holds the
  // backend's lock.
  Group &Get(const std::string &name, int device);
  // Collective contexts first (they are windows), then the comms.
  void ReleaseColls();
  void ReleaseAll();

 private:
  std::map<std::pair<std::string, int>, std::unique_ptr<Group>> groups_;
  // Communicators made so far per group name: every rank makes them in the
  // same order (they are collective), so the count names the store scope of
  // the next one identically on every rank, whatever devices they are on.
  std::map<std::string, int> made_;
};

}  // namespace mori_torch
