// SPDX-License-Identifier: MIT
#include "torch_backend/build_info.h"

#ifndef MORI_TORCH_MORI_VERSION
#error "MORI_TORCH_MORI_VERSION: the build passes mori's version (bazel/version.bzl)"
#endif

namespace mori_torch {

const char *MoriVersion() { return MORI_TORCH_MORI_VERSION; }

namespace {

template <typename Ops>
std::string Names(const Ops *const *ops, size_t count) {
  std::string out;
  for (size_t i = 0; i < count; i++) {
    if (i) out += ',';
    out += ops[i] && ops[i]->name ? ops[i]->name : "?";
  }
  return out;
}

}  // namespace

std::string FormatBuildInfo(const char *platform, const char *torch, const mori_handle_ops_t *const *handles,
                            size_t num_handles, const mori_transport_ops_t *const *transports, size_t num_transports,
                            const char *const *op_schemas, size_t num_ops) {
  std::string ops;
  for (size_t i = 0; i < num_ops; i++) {
    std::string schema = op_schemas[i];
    if (i) ops += ',';
    ops += schema.substr(0, schema.find('('));
  }
  return std::string("mori=") + MoriVersion() + " platform=" + platform + " torch=" + torch +
         " handles=" + Names(handles, num_handles) + " transports=" + Names(transports, num_transports) + " ops=" + ops;
}

}  // namespace mori_torch
