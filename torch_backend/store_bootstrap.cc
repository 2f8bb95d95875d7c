#include "torch_backend/store_bootstrap.h"

#include <chrono>
#include <cstring>
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
};

std::string Key(const StoreState &s, uint64_t seq, int rank) {
  return s.prefix + std::to_string(seq) + "/" + std::to_string(rank);
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
    return mori_error_report(MORI_ERANK_TIMEOUT, "store bootstrap (%s): rank(s) %s did not arrive at step %llu within %lld ms",
                          s.prefix.c_str(), missing.empty() ? "?" : missing.c_str(), (unsigned long long)seq,
                          (long long)s.timeout.count());
  }
}

int StoreAllgather(void *state, const void *send, void *recv, size_t bytes) {
  auto &s = *static_cast<StoreState *>(state);
  uint64_t seq = ++s.seq;
  try {
    const uint8_t *p = static_cast<const uint8_t *>(send);
    s.store->set(Key(s, seq, s.rank), std::vector<uint8_t>(p, p + bytes));
    std::vector<int> all;
    for (int r = 0; r < s.size; r++) all.push_back(r);
    int rc = WaitFor(s, seq, all);
    if (rc) return rc;
    for (int r = 0; r < s.size; r++) {
      std::vector<uint8_t> v = s.store->get(Key(s, seq, r));
      if (v.size() != bytes)
        return mori_error_report(MORI_EMISMATCH, "store bootstrap: rank %d contributed %zu bytes, rank %d %zu bytes", r, v.size(),
                              s.rank, bytes);
      if (bytes) memcpy(static_cast<uint8_t *>(recv) + r * bytes, v.data(), bytes);
    }
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
      const uint8_t *p = static_cast<const uint8_t *>(buf);
      s.store->set(Key(s, seq, root), std::vector<uint8_t>(p, p + bytes));
      return 0;
    }
    int rc = WaitFor(s, seq, {root});
    if (rc) return rc;
    std::vector<uint8_t> v = s.store->get(Key(s, seq, root));
    if (v.size() != bytes)
      return mori_error_report(MORI_EMISMATCH, "store bootstrap: broadcast of %zu bytes from rank %d, expected %zu", v.size(),
                            root, bytes);
    memcpy(buf, v.data(), bytes);
    return 0;
  } catch (const std::exception &e) {
    return mori_error_report(MORI_EIO, "store bootstrap: %s", e.what());
  }
}

int StoreFini(void *state) {
  delete static_cast<StoreState *>(state);
  return 0;
}

const mori_bootstrap_ops_t kStoreOps = {
    sizeof(mori_bootstrap_ops_t), MORI_BOOTSTRAP_ABI_VERSION, "torch-store", StoreAllgather, StoreBarrier, StoreBcast,
    StoreFini,
};

}  // namespace

int CreateStoreBootstrap(const c10::intrusive_ptr<c10d::Store> &store, const std::string &group, int rank, int size,
                         mori_bootstrap_t **out) {
  auto *s = new StoreState;
  s->store = store;
  s->prefix = "mori/" + group + "/";
  s->rank = rank;
  s->size = size;
  s->timeout = std::chrono::milliseconds(mori_bootstrap_default_timeout_ms());
  int rc = mori_bootstrap_create(&kStoreOps, s, rank, size, out);
  if (rc) delete s;
  return rc;
}

}  // namespace mori_torch
