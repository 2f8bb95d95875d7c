# SPDX-License-Identifier: MIT
"""mori's device functions for Triton kernels, over address maps
(mori.address_map): translate, remote load / store / atomic add, put (a
program-wide copy into a peer), signal set / add, wait-until with a bound,
and a barrier — so a Triton kernel can move data to peers and complete with
per-peer signals inside the same kernel, as the C device API does.

    from mori import triton as mt
    remote = mt.translate(ptr, peer, m_bases, my_rank)   # m_bases: map.peer_bases
    mt.put(dst, src, n, peer, m_bases, my_rank, BLOCK=1024)
    mt.signal_add(sig + my_rank, 1, peer, sig_bases, my_rank)
    ok = mt.wait_until(sig + peer, value, max_spins)

Every function is written in Triton's own language (pointer arithmetic and
system-scope atomics), so it compiles for NVIDIA and AMD GPUs alike. A
signal orders the calling program's earlier stores before it (a program
barrier, then a release at system scope); a wait acquires. Waits are bounded
by a spin count and return whether the value arrived, so no kernel hangs.

AllToAll is an all-to-all built on these functions: each chunk is pushed
straight into the peer's symmetric out, after the peer has announced it
started the call, and completion rides on per-peer counters inside the
kernel (graph-capturable: the call count lives on the device).

mori.triton.lib is mori's device library for Triton kernels (the MORI
Shmem device API as bitcode linked into the kernel); it is imported when
named (`from mori.triton import lib`), not by `import mori.triton`."""
import triton
import triton.language as tl


@triton.jit
def translate(ptr, rank, peer_bases, local_rank):
    """ptr (inside the map's allocation on this rank) as seen on `rank`; a
    null pointer where `rank` is not load/store reachable (its table entry
    is 0), as the C device translate answers, never the offset taken for an
    address. ptr is not range-checked here (the kernel's sizes are the
    caller's: the host-side translate and AllToAll check them)."""
    local_base = tl.load(peer_bases + local_rank)
    remote_base = tl.load(peer_bases + rank)
    remote = tl.where(remote_base != 0, remote_base + (ptr.to(tl.int64) - local_base), 0)
    return remote.to(ptr.dtype)


@triton.jit
def load(ptr, rank, peer_bases, local_rank, mask=None):
    return tl.load(translate(ptr, rank, peer_bases, local_rank), mask=mask)


@triton.jit
def store(ptr, value, rank, peer_bases, local_rank, mask=None):
    tl.store(translate(ptr, rank, peer_bases, local_rank), value, mask=mask)


@triton.jit
def atomic_add(ptr, value, rank, peer_bases, local_rank):
    """Remote atomic add at system scope (relaxed); returns the old value."""
    return tl.atomic_add(translate(ptr, rank, peer_bases, local_rank), value, sem="relaxed", scope="sys")


@triton.jit
def put(dst, src, n, rank, peer_bases, local_rank, BLOCK: tl.constexpr):
    """The program copies n elements from local src to dst (inside the map's
    allocation) on `rank`."""
    remote = translate(dst, rank, peer_bases, local_rank)
    for off in range(0, n, BLOCK):
        o = off + tl.arange(0, BLOCK)
        m = o < n
        tl.store(remote + o, tl.load(src + o, mask=m), mask=m)


@triton.jit
def signal_set(sig, value, rank, peer_bases, local_rank):
    """sig on `rank` := value, after every earlier store of this program."""
    tl.debug_barrier()
    tl.atomic_xchg(translate(sig, rank, peer_bases, local_rank), value, sem="release", scope="sys")


@triton.jit
def signal_add(sig, value, rank, peer_bases, local_rank):
    """sig on `rank` += value, after every earlier store of this program."""
    tl.debug_barrier()
    tl.atomic_add(translate(sig, rank, peer_bases, local_rank), value, sem="release", scope="sys")


@triton.jit
def wait_until(sig, value, max_spins):
    """Until the local sig >= value (acquire), at most max_spins polls;
    returns whether it arrived."""
    v = tl.atomic_add(sig, 0, sem="acquire", scope="sys")
    spins = 0
    while (v < value) & (spins < max_spins):
        v = tl.atomic_add(sig, 0, sem="acquire", scope="sys")
        spins += 1
    return v >= value


@triton.jit
def barrier(sig, epoch, world, peer_bases, local_rank, max_spins):
    """Every rank's program meets here (one program per rank calls it):
    sig is a symmetric int64[world] array; epoch counts the barriers
    (1, 2, ...). Returns whether every rank arrived within the bound."""
    for r in range(0, world):
        signal_set(sig + local_rank, epoch, r, peer_bases, local_rank)
    ok = True
    for r in range(0, world):
        ok = ok & wait_until(sig + r, epoch, max_spins)
    return ok


@triton.jit
def _a2a_kernel(src, out, out_bases, sig, sig_bases, state, rank, world, chunk, max_spins, BPP: tl.constexpr,
                BLOCK: tl.constexpr):
    # state (local, int64): [0] calls done, [1] programs done in this call,
    # [2] set when a wait gave up, [3] pieces each source has pushed here over
    # the calls done (calls may use different BPP). sig (symmetric,
    # int64[2 * world]): [src] counts the pieces src pushed here over all
    # calls, [world + src] the last call src has started.
    pid = tl.program_id(0)
    nprog = tl.num_programs(0)
    epoch = tl.atomic_add(state, 0, sem="acquire", scope="gpu") + 1
    pieces = tl.atomic_add(state + 3, 0, sem="relaxed", scope="gpu") + BPP
    k = pid // BPP
    sub = pid % BPP
    per = tl.cdiv(chunk, BPP)
    lo = sub * per
    n = tl.maximum(tl.minimum(per, chunk - lo), 0)
    ok = True
    if k < world - 1:
        peer = (rank + 1 + k) % world
        if sub == 0:  # this rank's out is free: announce the call to peer
            signal_set(sig + world + rank, epoch, peer, sig_bases, rank)
        ok = wait_until(sig + world + peer, epoch, max_spins)  # and wait for peer's
        if ok:
            put(out + rank * chunk + lo, src + peer * chunk + lo, n, peer, out_bases, rank, BLOCK)
        signal_add(sig + rank, 1, peer, sig_bases, rank)
        if sub == 0:
            source = (rank - 1 - k + world) % world
            ok = ok & wait_until(sig + source, pieces, max_spins)
    else:
        for off in range(0, n, BLOCK):
            o = lo + off + tl.arange(0, BLOCK)
            m = o < lo + n
            tl.store(out + rank * chunk + o, tl.load(src + rank * chunk + o, mask=m), mask=m)
    if not ok:
        tl.atomic_xchg(state + 2, 1, sem="relaxed", scope="gpu")
    tl.debug_barrier()
    done = tl.atomic_add(state + 1, 1, sem="acq_rel", scope="gpu")
    if done == nprog - 1:  # the last program: every program has read the epoch
        tl.atomic_xchg(state + 1, 0, sem="relaxed", scope="gpu")
        tl.atomic_xchg(state + 3, pieces, sem="relaxed", scope="gpu")
        tl.atomic_xchg(state, epoch, sem="release", scope="gpu")


class AllToAll:
    """out[r * chunk:(r + 1) * chunk] on this rank = rank r's
    inp[me * chunk:(me + 1) * chunk], in one Triton kernel, `out` any tensor
    with an address map (a symmetric tensor's from address_map, an adopted
    tensor's from adopt, a shmem allocation's). Collective to make."""

    def __init__(self, group, device, bpp=None, block=2048, max_spins=1 << 26):
        import torch
        import torch.distributed as dist

        from mori.address_map import adopt

        self.group = group
        self.world = dist.get_world_size(group)
        self.rank = dist.get_rank(group)
        self.bpp, self.block, self.max_spins = bpp, block, max_spins
        # The counters are a plain tensor adopted by mori (no symmetric
        # allocation): the all-to-all works under any symmetric-memory
        # backend, and into any out that has an address map.
        self.sig = torch.zeros(2 * self.world, dtype=torch.int64, device=device)
        self.sig_map = adopt(self.sig, group)
        self.state = torch.zeros(4, dtype=torch.int64, device=device)
        torch.cuda.synchronize(device)
        dist.barrier(group)  # every sig zeroed before any peer writes into it

    def __call__(self, inp, out, out_map):
        self._check_call(inp, out, out_map)
        chunk = inp.numel() // self.world
        # Programs per peer: given, else 16 up to 1 MiB per peer and 64
        # beyond (more programs keep more stores in flight on large chunks).
        bpp = self.bpp or (16 if chunk * inp.element_size() <= (1 << 20) else 64)
        _a2a_kernel[(self.world * bpp,)](inp, out, out_map.peer_bases, self.sig, self.sig_map.peer_bases,
                                         self.state, self.rank, self.world, chunk, self.max_spins,
                                         BPP=bpp, BLOCK=self.block)
        return out

    def _check_call(self, inp, out, out_map):
        """Every rank writes world x chunk elements into `out` on every peer
        through out_map's table: what does not fit would land in the peers'
        next allocation. Refused here, before anything is launched (local:
        a peer that did launch waits out its bound, and check() says so)."""
        what = f"mori.triton all-to-all on rank {self.rank}"
        if inp.dtype != out.dtype:
            raise ValueError(f"{what}: inp is {inp.dtype}, out is {out.dtype}: they must match")
        if not (inp.is_contiguous() and out.is_contiguous()):
            raise ValueError(f"{what}: inp and out must be contiguous")
        if inp.numel() % self.world:
            raise ValueError(f"{what}: inp has {inp.numel()} elements, not a multiple of the world size {self.world}")
        if out.numel() < inp.numel():
            raise ValueError(f"{what}: out has {out.numel()} elements, fewer than inp's {inp.numel()}")
        if out_map.world_size != self.world or out_map.local_rank != self.rank:
            raise ValueError(f"{what}: out_map is of a group of {out_map.world_size} (this rank {out_map.local_rank}), "
                             f"the all-to-all's of {self.world} (this rank {self.rank})")
        start, nbytes = out.data_ptr(), inp.numel() * inp.element_size()
        base, size = out_map.allocation_base, out_map.allocation_bytes
        if not (base <= start and start + nbytes <= base + size):
            raise ValueError(f"{what}: the {nbytes} bytes written at out ({start:#x}) do not lie inside out_map's "
                             f"allocation [{base:#x}, +{size}): pass out's own map")

    def check(self):
        """Raises when a wait of an earlier call gave up (a peer that never
        came); host synchronising."""
        if int(self.state[2].item()):
            raise RuntimeError(f"mori.triton all-to-all on rank {self.rank}: a wait for a peer gave up after "
                               f"{self.max_spins} polls")
