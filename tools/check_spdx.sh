#!/bin/bash
# SPDX-License-Identifier: MIT
# Every source file of mori carries an SPDX line in its first three lines
# (after a shebang, where there is one). Prints the files that lack it and
# fails; with --fix, adds "SPDX-License-Identifier: MIT" to them instead.
set -euo pipefail
cd "$(dirname "$0")/.."
fix=0; [ "${1:-}" = --fix ] && fix=1
comment_for() { # the comment leader a file of this name takes
  case "$1" in
    *.c | *.h | *.cc | *.cu | *.cpp | *.hpp) echo "//" ;;
    *.py | *.sh | *.bzl | *.bazel | */BUILD | BUILD | */WORKSPACE | WORKSPACE | *.BUILD | *.cmake | *.in | .bazelrc | .ci/run) echo "#" ;;
    *) echo "" ;;
  esac
}
missing=0
while IFS= read -r f; do
  lead=$(comment_for "$f")
  [ -n "$lead" ] || continue
  head -n 3 "$f" | grep -q 'SPDX-License-Identifier: MIT' && continue
  if [ $fix -eq 1 ]; then
    line="$lead SPDX-License-Identifier: MIT"
    if head -n 1 "$f" | grep -q '^#!'; then
      { head -n 1 "$f"; echo "$line"; tail -n +2 "$f"; } > "$f.spdx"
    else
      { echo "$line"; cat "$f"; } > "$f.spdx"
    fi
    chmod --reference="$f" "$f.spdx" && mv "$f.spdx" "$f"
  else
    echo "no SPDX line: $f"; missing=$((missing + 1))
  fi
done < <(git ls-files --cached --others --exclude-standard)
[ $missing -eq 0 ] || { echo "$missing source files lack 'SPDX-License-Identifier: MIT'"; exit 1; }
