#!/bin/bash
# SPDX-License-Identifier: MIT
# Fails if //shmem:shmem depends on a transport or a handle library: the
# program lists those itself. A transport's device part (header-only code
# kernels run, such as //transport/rdma/gda:device, which the device API
# composes) is not a plug-in and links nothing.
set -u
deps=$1
bad=$(grep -E '^//(transport|handles)/' "$deps" | grep -vE '^//transport/[^:]+:(device|include/mori/device/.*\.h)$')
if [ -n "$bad" ]; then
  echo "FAIL: //shmem:shmem pulls in plug-ins the program did not list:"
  echo "$bad"
  exit 1
fi
echo "OK: //shmem:shmem depends on $(grep -c '^//' "$deps") targets, none of them a transport or handle library"
