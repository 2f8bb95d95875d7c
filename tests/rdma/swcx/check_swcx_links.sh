#!/bin/bash
# SPDX-License-Identifier: MIT
# Usage: check_swcx_links.sh LIBMORI PROGRAM ASKER
# Fails if the software ConnectX (//transport/rdma/swcx) is in a binary
# that did not ask for it (LIBMORI, PROGRAM), or missing from ASKER, the
# binary that links it (so the check itself is seen to find it). Its mark:
# its provider's name, a string only its sources hold.
set -u
marks='software ConnectX over'
status=0
has_mark() { grep -a -c -F "$marks" "$1" 2>/dev/null || true; }
for bin in "$1" "$2"; do
  n=$(has_mark "$bin")
  if [ "${n:-0}" -ne 0 ]; then
    echo "FAIL: $bin holds the software ConnectX ($n lines match \"$marks\") without asking for it"
    status=1
  else
    echo "OK: $bin holds no software ConnectX"
  fi
done
n=$(has_mark "$3")
if [ "${n:-0}" -eq 0 ]; then
  echo "FAIL: $3 links //transport/rdma/swcx but no mark \"$marks\" was found in it: the check cannot see it"
  status=1
else
  echo "OK: $3, which asks for it, holds the software ConnectX"
fi
exit $status
