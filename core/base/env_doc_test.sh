#!/bin/bash
# SPDX-License-Identifier: MIT
# docs/environment.md is what //core/base:env_doc writes from the table now.
set -euo pipefail
generator=$1 doc=$2
if ! diff -u "$doc" <("$generator"); then
  echo "docs/environment.md is stale: run bazel run //core/base:env_doc > docs/environment.md" >&2
  exit 1
fi
