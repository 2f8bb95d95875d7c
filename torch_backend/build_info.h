// SPDX-License-Identifier: MIT
// The backend's build-info string (mori_torch_build_info; Python reads it
// as key=value pairs, mori.allocator.supports()): derived from what was
// built, never written by hand — mori's version from bazel/version.bzl
// (a define the build passes), the platform mori runs on, the torch it was
// compiled against, the plug-in lists the comms are made with
// (plugins.h) and the ops the library registers. No torch here: a host
// test checks it.
#pragma once

#include <cstddef>
#include <string>

#include "mori/plugin.h"

namespace mori_torch {

// mori's version as the build defines it (bazel/version.bzl).
const char *MoriVersion();

// "mori=<version> platform=<platform> torch=<torch> handles=<a,b,...>
//  transports=<c,d,...> ops=<e,f,...>": plug-ins by their ops' names, ops
// by the name that opens each schema ("all_to_all(Tensor ...) -> ()").
std::string FormatBuildInfo(const char *platform, const char *torch, const mori_handle_ops_t *const *handles,
                            size_t num_handles, const mori_transport_ops_t *const *transports, size_t num_transports,
                            const char *const *op_schemas, size_t num_ops);

// The schemas of the ops the library registers (ops.cc), in order.
extern const char *const kOpSchemas[];
extern const size_t kNumOps;

}  // namespace mori_torch
