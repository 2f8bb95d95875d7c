# SPDX-License-Identifier: MIT
"""mori: symmetric memory for GPUs. `import mori.allocator` registers the
"MORI" backend of torch's symmetric memory; then
`torch.distributed._symmetric_memory.set_backend("MORI")`. `import mori.ops`
adds the fused collectives, and `import mori.shmem` is MORI Shmem (no torch
needed). Importing `mori` itself loads nothing."""
