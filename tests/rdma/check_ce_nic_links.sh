#!/bin/bash
# SPDX-License-Identifier: MIT
# Usage: check_ce_nic_links.sh LIBMORI PROGRAM ASKER
# Fails if the copy-engine NIC (//transport/rdma/ce_nic) is in a binary that
# did not ask for it (LIBMORI, PROGRAM), or missing from ASKER, the
# binary that links it (so the check itself is seen to find it). Its marks:
# the name of its key table's memfd and of its key service's socket, strings
# that only its sources hold and that survive stripping.
set -u
marks='mori-ce-nic-keys|mori-ce-nic-%08x'
status=0
has_mark() { grep -a -c -E "$marks" "$1" 2>/dev/null || true; }
for bin in "$1" "$2"; do
  n=$(has_mark "$bin")
  if [ "${n:-0}" -ne 0 ]; then
    echo "FAIL: $bin holds the copy-engine NIC ($n lines match /$marks/) without asking for it"
    status=1
  else
    echo "OK: $bin holds no copy-engine NIC"
  fi
done
n=$(has_mark "$3")
if [ "${n:-0}" -eq 0 ]; then
  echo "FAIL: $3 links //transport/rdma/ce_nic but no mark /$marks/ was found in it: the check cannot see it"
  status=1
else
  echo "OK: $3, which asks for it, holds the copy-engine NIC"
fi
exit $status
