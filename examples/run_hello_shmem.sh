#!/bin/bash
# SPDX-License-Identifier: MIT
# Runs hello_shmem on 2, 4 and 8 CPU PEs, the unique ID through a file.
set -eu
launch=$1 bin=$2
for n in 2 4 8; do
  out=$(MORI_SHMEM_VMM_CHUNK_SIZE=4M MORI_SHMEM_HEAP_SIZE=64M "$launch" -n "$n" -t 60 "$bin" "${TEST_TMPDIR:-/tmp}/hello_shmem_uid_$n")
  echo "$out"
  [ "$(echo "$out" | grep -c ', 0 wrong')" -eq "$n" ]
done
