# SPDX-License-Identifier: MIT
"""mori.triton_lib is mori.triton.lib, mori's device library for Triton
kernels, under the name it had first: `import mori.triton_lib as ml` gives
the very same module object (its state, its cache of filled modules)."""
import sys

from mori.triton import lib as _lib

sys.modules[__name__] = _lib
