#!/bin/bash
# SPDX-License-Identifier: MIT
# Runs hello_shmem on 2, 4 and 8 CPU PEs, the unique ID through a file; with
# no MORI_SHMEM_* variable set (the example sets its own heap size).
set -eu
launch=$1 bin=$2
for n in 2 4 8; do
  out=$(env -u MORI_SHMEM_HEAP_SIZE -u MORI_SHMEM_MODE "$launch" -n "$n" -t 60 "$bin" "${TEST_TMPDIR:-/tmp}/hello_shmem_uid_$n")
  echo "$out"
  [ "$(echo "$out" | grep -c ', 0 wrong')" -eq "$n" ]
done
