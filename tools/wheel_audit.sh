#!/bin/bash
# SPDX-License-Identifier: MIT
# auditwheel's verdict on mori wheels: for each, the platform tag auditwheel
# finds the wheel consistent with must be the manylinux tag in its name (the
# libraries need no library the wheel does not carry but the system ones a
# manylinux policy allows, and no newer glibc than the tag says). Installs
# auditwheel (PyPI) into .deps/auditwheel once ($MORI_AUDITWHEEL_DIR
# elsewhere).
#   tools/wheel_audit.sh <mori-*.whl>...
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
deps=${MORI_AUDITWHEEL_DIR:-$here/../.deps/auditwheel}
version=6.8.2
if ! PYTHONPATH=$deps python3 -c "import auditwheel" 2>/dev/null; then
  echo "wheel_audit: installing auditwheel $version into .deps/auditwheel"
  python3 -m pip install -q --disable-pip-version-check --no-compile --target "$deps" "auditwheel==$version"
fi
fail=0
for whl in "$@"; do
  name=$(basename "$whl" .whl)
  tag=${name##*-}
  PYTHONPATH=$deps python3 -m auditwheel show "$whl"
  verdict=$(PYTHONPATH=$deps python3 -m auditwheel show --json "$whl" |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["overall_tag"])')
  if [ "$verdict" = "$tag" ]; then
    echo "ok: $(basename "$whl"): auditwheel agrees with $tag"
  else
    echo "FAIL: $(basename "$whl") is tagged $tag, but auditwheel finds it consistent with $verdict only"
    fail=1
  fi
done
exit $fail
