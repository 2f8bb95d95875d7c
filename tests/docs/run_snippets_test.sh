#!/bin/bash
# SPDX-License-Identifier: MIT
# The quick-starts as written (run_snippets.py), after checking that the
# runner itself fails a failing snippet and a marker without a block.
#   run_snippets_test.sh <run_snippets.py> <libmori.so> <install tree.tar.gz> NAME=PROGRAM...
# (the programs snippets call by name: mori_launch and the examples)
set -u
runner=$1 lib=$2 tree=$3
shift 3
bins=()
for b in "$@"; do bins+=(--bin "$b"); done

tmp=${TEST_TMPDIR:-$(mktemp -d)}
mkdir -p "$tmp/bad/docs" "$tmp/dangling/docs"
printf '<!-- runnable -->\n```sh\necho about to fail\nexit 3\n```\n' > "$tmp/bad/docs/bad.md"
printf 'text\n<!-- runnable -->\nno block follows\n' > "$tmp/dangling/docs/dangling.md"
if python3 "$runner" --root "$tmp/bad" "${bins[@]}" >"$tmp/log" 2>&1; then
  cat "$tmp/log"; echo "FAIL: a snippet that exits 3 passed"; exit 1
fi
grep -q 'docs/bad.md:2 (sh): FAILED' "$tmp/log" || { cat "$tmp/log"; echo "FAIL: the failing snippet is not named"; exit 1; }
if python3 "$runner" --root "$tmp/dangling" "${bins[@]}" >"$tmp/log" 2>&1; then
  cat "$tmp/log"; echo "FAIL: a marker without a block passed"; exit 1
fi
grep -q 'docs/dangling.md:2: a runnable marker not followed' "$tmp/log" || { cat "$tmp/log"; echo "FAIL: no message"; exit 1; }

# The install tree for C blocks and pkg-config lines (docs/install.md).
mkdir -p "$tmp/prefix" && tar -xzf "$tree" -C "$tmp/prefix"

# Under --config=asan the library needs the ASan runtime first in python3.
asan=$(ldd "$lib" | awk '/libasan/ {print $3}')
# The examples' header commands and the docs' runnable blocks: at least the
# four examples and the shmem guide's Python program.
exec python3 "$runner" --root . "${bins[@]}" --python-path python --libmori "$lib" \
  --prefix "$tmp/prefix" \
  ${asan:+--preload "$asan"} --min 5
