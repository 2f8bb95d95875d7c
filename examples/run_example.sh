#!/bin/bash
# SPDX-License-Identifier: MIT
# Runs hello_window on 2, 4 and 8 CPU ranks.
set -eu
launch=$1 bin=$2
for n in 2 4 8; do
  out=$("$launch" -n "$n" -t 60 "$bin")
  echo "$out"
  [ "$(echo "$out" | grep -c ', 0 wrong')" -eq "$n" ]
done
