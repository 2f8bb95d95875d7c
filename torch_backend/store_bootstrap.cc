// SPDX-License-Identifier: MIT
#include "torch_backend/store_bootstrap.h"

#include <chrono>
#include <cstring>
#include <deque>
#include <vector>

#include "mori/error.h"

namespace mori_torch {
namespace {

struct StoreState {
  c10::intrusive_ptr<c10d::Store> store;
  std::string prefix;
  int rank = 0, size = 1;
  uint64_t seq = 0;
  std::chrono::milliseconds timeout{60000};
  std::deque<std::pair<uint64_t, std::string>> written;  // (step, key) this rank set
};

std::string Key(const StoreState &s, uint64_t seq, int rank) {
  return s.prefix + std::to_string(seq) + "/" + std::to_string(rank);
}

// Every rank has reached step `seq`: all steps before it have been read by
// everybody, so this rank's keys of those steps can go.
void ForgetBefore(StoreState &s, uint64_t seq) {
  while (!s.written.empty() && s.written.front().first < seq) {
    try {
      s.store->deleteKey(s.written.front().second);
    } catch (...) {
      // A store without deletion (or a transient error): the key stays.
    }
    s.written.pop_front();
  }
}

void Set(StoreState &s, uint64_t seq, const void *data, size_t bytes) {
  const uint8_t *p = static_cast<const uint8_t *>(data);
  std::string key = Key(s, seq, s.rank);
  s.store->set(key, std::vector<uint8_t>(p, p + bytes));
  s.written.emplace_back(seq, key);
}

// Waits for the keys of `ranks`; on timeout, names the ranks whose key is missing.
int WaitFor(StoreState &s, uint64_t seq, const std::vector<int> &ranks) {
  std::vector<std::string> keys;
  for (int r : ranks) keys.push_back(Key(s, seq, r));
  try {
    s.store->wait(keys, s.timeout);
    return 0;
  } catch (const std::exception &e) {
    std::string missing;
    for (int r : ranks) {
      bool present = false;
      try {
        present = s.store->check({Key(s, seq, r)});
      } catch (...) {
      }
      if (!present) missing += (missing.empty() ? "" : ", ") + std::to_string(r);
    }
    return mori_error_report(MORI_ERANK_TIMEOUT,
                             "store bootstrap (%s): rank(s) %s did not arrive at step %llu within %lld ms", s.prefix.c_str(),
                             missing.empty() ? "?" : missing.c_str(), (unsigned long long)seq, (long long)s.timeout.count());
  }
}

int StoreAllgather(void *state, const void *send, void *recv, size_t bytes) {
  auto &s = *static_cast<StoreState *>(state);
  uint64_t seq = ++s.seq;
  try {
    Set(s, seq, send, bytes);
    std::vector<int> all;
    for (int r = 0; r < s.size; r++) all.push_back(r);
    int rc = WaitFor(s, seq, all);
    if (rc) return rc;
    for (int r = 0; r < s.size; r++) {
      std::vector<uint8_t> v = s.store->get(Key(s, seq, r));
      if (v.size() != bytes)
        return mori_error_report(MORI_EMISMATCH, "store bootstrap: rank %d contributed %zu bytes, rank %d %zu bytes", r,
                                 v.size(), s.rank, bytes);
      if (bytes) memcpy(static_cast<uint8_t *>(recv) + r * bytes, v.data(), bytes);
    }
    ForgetBefore(s, seq);
    return 0;
  } catch (const std::exception &e) {
    return mori_error_report(MORI_EIO, "store bootstrap: %s", e.what());
  }
}

int StoreBarrier(void *state) {
  auto &s = *static_cast<StoreState *>(state);
  std::vector<uint8_t> all(s.size);
  uint8_t one = 1;
  return StoreAllgather(state, &one, all.data(), 1);
}

int StoreBcast(void *state, void *buf, size_t bytes, int root) {
  auto &s = *static_cast<StoreState *>(state);
  uint64_t seq = ++s.seq;
  try {
    if (s.rank == root) {
      Set(s, seq, buf, bytes);  // deleted after the next allgather, when everyone has read it
      return 0;
    }
    int rc = WaitFor(s, seq, {root});
    if (rc) return rc;
    std::vector<uint8_t> v = s.store->get(Key(s, seq, root));
    if (v.size() != bytes)
      return mori_error_report(MORI_EMISMATCH, "store bootstrap: broadcast of %zu bytes from rank %d, expected %zu",
                               v.size(), root, bytes);
    memcpy(buf, v.data(), bytes);
    return 0;
  } catch (const std::exception &e) {
    return mori_error_report(MORI_EIO, "store bootstrap: %s", e.what());
  }
}

int StoreFini(void *state) {
  auto *s = static_cast<StoreState *>(state);
  // Keys of the last step may still be read by a slower rank: they stay
  // (one key per rank per group, whatever the job's length).
  ForgetBefore(*s, s->seq);
  delete s;
  return 0;
}

// Field by field (C++17 has no designated initializers): a field added to
// the struct, or two reordered, cannot shift an op into another's place.
mori_bootstrap_ops_t MakeStoreOps() {
  mori_bootstrap_ops_t ops{};
  ops.size = sizeof(mori_bootstrap_ops_t);
  ops.abi_version = MORI_BOOTSTRAP_ABI_VERSION;
  ops.name = "torch-store";
  ops.allgather = StoreAllgather;
  ops.barrier = StoreBarrier;
  ops.bcast = StoreBcast;
  ops.fini = StoreFini;
  return ops;  // allgather_grace: none, the default (allgather within the store's limit)
}

const mori_bootstrap_ops_t kStoreOps = MakeStoreOps();

}  // namespace

int CreateStoreBootstrap(const c10::intrusive_ptr<c10d::Store> &store, const std::string &scope, int rank, int size,
                         mori_bootstrap_t **out) {
  auto *s = new StoreState;
  s->store = store;
  s->prefix = "mori/" + scope + "/";
  s->rank = rank;
  s->size = size;
  s->timeout = std::chrono::milliseconds(mori_bootstrap_default_timeout_ms());
  int rc = mori_bootstrap_create(&kStoreOps, s, rank, size, out);
  if (rc) delete s;
  return rc;
}

}  // namespace mori_torch
