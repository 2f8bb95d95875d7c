#!/bin/bash
# SPDX-License-Identifier: MIT
# Fails if the binary needs libibverbs, hsa-runtime or libmpi (directly or
# through any library it loads at start).
set -u
bin=$1
needed=$(ldd "$bin" 2>&1)
echo "$needed"
if echo "$needed" | grep -Eq 'libibverbs|libhsa-runtime|libmlx5|libmpi'; then
  echo "FAIL: $bin links a transport it does not use"
  exit 1
fi
echo "OK: $bin links neither libibverbs, hsa-runtime nor libmpi"
