# SPDX-License-Identifier: MIT
"""mori.shmem's address maps and locality (shmem_address_map,
shmem_translate, shmem_locality) across separate processes on the host
platform, at 2, 4 and 8 PEs on one node and at 4 PEs on two simulated nodes
(MORI_HOST_ID): the maps of two allocations and of an interior pointer, the
device table against the host tuple, translations peers wrote through,
refusals with their reason, and no torch imported on the way."""
import copy
import ctypes
import dataclasses
import os
import pickle
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))  # the runfiles' workspace root
sys.path.insert(0, os.path.join(ROOT, "python"))  # the package mori (//python:package)
os.environ.setdefault("MORI_LIB", os.path.join(ROOT, "libmori.so"))
sys.path.insert(0, HERE)
from uid_file import share_unique_id  # noqa: E402


def expect_raises(kind, fn, *args, says=()):
    try:
        fn(*args)
    except kind as e:
        for s in says:
            assert s in str(e), f"{s!r} not in {e}"
        return e
    raise AssertionError(f"{fn.__name__}{args} did not raise {kind.__name__}")


def init(rank, size, uid_path):
    from mori import shmem

    uid = share_unique_id(shmem, rank, uid_path)
    shmem.shmem_init_attr(shmem.MORI_SHMEM_INIT_WITH_UNIQUEID, rank, size, uid)
    return shmem


def pe_main(rank, size, uid_path, nodes):
    if nodes > 1:
        os.environ["MORI_HOST_ID"] = f"node-{rank * nodes // size}"
    shmem = init(rank, size, uid_path)
    me, n = shmem.shmem_mype(), shmem.shmem_npes()
    per_node = n // nodes
    same_node = [pe // per_node == me // per_node for pe in range(n)]
    a = shmem.shmem_malloc(64 * 1024)
    b = shmem.shmem_malloc(4096)
    ma, inner, mb = shmem.shmem_address_map(a), shmem.shmem_address_map(a + 5000), shmem.shmem_address_map(b + 4095)
    assert (ma.local_rank, ma.world_size) == (me, n), ma
    assert (ma.allocation_base, ma.allocation_bytes) == (a, 64 * 1024), ma
    assert inner == ma, "an interior pointer maps the whole allocation"
    assert (mb.allocation_base, mb.allocation_bytes) == (b, 4096), mb
    assert mb.peer_bases_address != ma.peer_bases_address, "each allocation has its own table"
    assert ma.host_bases[me] == a, "peer_bases[local_rank] == allocation_base"
    for pe in range(n):
        assert bool(ma.host_bases[pe]) == same_node[pe], (pe, ma.host_bases)
        assert ma.host_bases[pe] == shmem.shmem_ptr_p2p(a, me, pe), pe
    # Host platform: the device table is host memory, readable here.
    table = (ctypes.c_uint64 * n).from_address(ma.peer_bases_address)
    assert tuple(table) == ma.host_bases, (tuple(table), ma.host_bases)
    try:
        import torch  # noqa: F401
    except ImportError:
        expect_raises(ImportError, lambda: ma.peer_bases, says=("needs torch",))
        assert "torch" not in sys.modules
    else:
        assert [v & (2**64 - 1) for v in ma.peer_bases.tolist()] == list(ma.host_bases)
    # A copy (dataclasses.replace) is checked as its original is: its table
    # is there while the allocation lives (it once said "was freed": the
    # copy had lost what the check reads), and gone with it (below).
    twin = dataclasses.replace(ma)
    assert twin == ma
    if "torch" in sys.modules:
        assert twin.peer_bases.tolist() == ma.peer_bases.tolist()
    else:
        expect_raises(ImportError, lambda: twin.peer_bases, says=("needs torch",))
    for pe in range(n):
        if not same_node[pe]:
            expect_raises(shmem.ShmemError, ma.translate, a, pe, says=("not load/store reachable",))
            continue
        at = ma.translate(a + 1024 + 8 * me, pe)
        assert at == shmem.shmem_translate(a + 1024 + 8 * me, pe)
        ctypes.c_int64.from_address(at).value = 3000 + me
    shmem.shmem_barrier_all()
    for src in range(n):
        if same_node[src]:
            got = ctypes.c_int64.from_address(a + 1024 + 8 * src).value
            assert got == 3000 + src, (src, got)
    # Refusals, each with its reason.
    expect_raises(ValueError, ma.translate, b, 0, says=("outside the allocation", f"on PE {me}"))
    for bad in (None, 1.5, True):  # an operand error, or True as address 1, before
        expect_raises(TypeError, ma.translate, bad, 0, says=("ptr must be an integer address",))
    e = expect_raises(shmem.ShmemError, ma.translate, a, n, says=(f"PE {n} is out of range ({n} PEs)",))
    assert e.name == "MORI_EINVAL", e
    e = expect_raises(shmem.ShmemError, shmem.shmem_address_map, id(e), says=("not inside a live shmem allocation",))
    assert e.name == "MORI_ENOT_OWNED", e
    # An error sent to another process (multiprocessing pickles it) arrives
    # whole; rebuilding it read the library's last error, or failed.
    for back in (pickle.loads(pickle.dumps(e)), copy.copy(e)):
        assert type(back) is shmem.ShmemError and str(back) == str(e), (back, e)
        assert (back.call, back.code, back.name, back.detail) == (e.call, e.code, e.name, e.detail), back
    shmem.shmem_barrier_all()
    shmem.shmem_free(b)
    expect_raises(shmem.ShmemError, shmem.shmem_address_map, b + 8, says=(f"that PE {me} freed",))
    expect_raises(shmem.ShmemError, mb.translate, b, 0, says=("freed",))
    # Locality: classes from the layout, the device table holding the words.
    loc = shmem.shmem_locality()
    assert len(loc.peers) == n
    for pe, p in enumerate(loc.peers):
        want = "self" if pe == me else "lsa" if same_node[pe] else "remote"
        assert (p.rank, p.peer_class) == (pe, want), p
        assert p.direct_access == same_node[pe] and p.system_atomics == same_node[pe], p
    words = (ctypes.c_uint32 * n).from_address(loc.table_address)
    assert list(words) == [p.word for p in loc.peers]
    assert shmem.shmem_locality().table_address == loc.table_address, "one table per comm"
    shmem.shmem_barrier_all()
    shmem.shmem_free(a)
    for m in (ma, twin):
        expect_raises(shmem.ShmemError, lambda: m.peer_bases, says=("was freed",))
    shmem.shmem_finalize()
    # The table is released with shmem: the property says so instead of
    # handing out a view of released memory.
    expect_raises(shmem.ShmemError, lambda: loc.table, says=("ShmemLocality.table", "not initialised"))
    # ... and stays refused after a new init, also where that init's comm
    # and table landed at the old addresses (malloc reuses them: seen after
    # a few init/finalize rounds), which `stale` stands for.
    init(rank, size, uid_path + ".again")
    now = shmem.shmem_locality()
    stale = dataclasses.replace(loc, table_address=now.table_address, _comm=now._comm)
    for old in (loc, stale):
        expect_raises(shmem.ShmemError, lambda: old.table, says=("ShmemLocality.table", "earlier shmem_init_attr"))
    shmem.shmem_finalize()
    print(f"PE {me} of {n}: ok", flush=True)


class ShmemPythonViewsTest(unittest.TestCase):
    def run_pes(self, n, nodes):
        env = dict(os.environ, MORI_SHMEM_VMM_CHUNK_SIZE="4M", MORI_SHMEM_HEAP_SIZE="64M",
                   MORI_BOOTSTRAP_TIMEOUT_MS="20000")
        with tempfile.TemporaryDirectory(dir=os.environ.get("TEST_TMPDIR")) as tmp:
            uid_path = os.path.join(tmp, "uid")
            procs = [subprocess.Popen([sys.executable, __file__, "pe", str(r), str(n), uid_path, str(nodes)], env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
                     for r in range(n)]
            outs = [p.communicate(timeout=120)[0] for p in procs]
            for r, (p, out) in enumerate(zip(procs, outs)):
                self.assertEqual(p.returncode, 0, f"PE {r} of {n} on {nodes} node(s):\n{out}")
                self.assertIn(f"PE {r} of {n}: ok", out)

    def test_one_node_at_2_4_and_8_pes(self):
        for n in (2, 4, 8):
            self.run_pes(n, 1)

    def test_two_nodes_at_4_pes(self):
        self.run_pes(4, 2)

    def test_an_adopted_map_is_unusable_once_released(self):
        """AdoptedMap (mori.address_map.adopt's result) after release: its
        peer_bases and translate raise, as the peers' memory may be gone (the
        table was once still handed out); a copy is a map of the same
        adoption and keeps it alive; maps compare by identity, released or
        not; repr says which. A stand-in table and release here: adopt needs
        a GPU."""
        import copy
        import gc
        import pickle

        from mori.address_map import AdoptedMap, _Adoption

        released = []
        table = [0x1000, 0x2000]

        def new_map():
            return AdoptedMap(peer_bases=table, local_rank=0, world_size=2, allocation_base=0x1000,
                              allocation_bytes=256, capabilities=1, host_bases=(0x1000, 0x2000),
                              _release=_Adoption(released.append, "released"))

        m = new_map()
        twin, deep = dataclasses.replace(m), copy.deepcopy(m)
        self.assertIs(m.peer_bases, table)
        self.assertEqual(twin.translate(0x1010, 1), 0x2010)
        self.assertIn("live", repr(m))
        self.assertTrue(m == m and m != twin and len({m, twin, deep}) == 3, "a handle: compared by identity")
        with self.assertRaisesRegex(TypeError, "cannot be pickled"):
            pickle.dumps(m)
        m.release()
        m.release()  # once only
        self.assertEqual(released, ["released"])
        for which in (m, twin, deep):
            for use in (lambda: which.peer_bases, lambda: which.translate(0x1010, 1)):
                with self.assertRaisesRegex(ValueError, "was released; adopt the tensor again"):
                    use()
            self.assertIn("released", repr(which))
        self.assertTrue(m == m and m in [twin, m] and hash(m) == hash(m), "released maps still compare and hash")
        # The adoption ends with its last map, not with the first one made.
        released.clear()
        m = new_map()
        twin = dataclasses.replace(m)
        del m
        gc.collect()
        self.assertEqual(released, [])
        self.assertIs(twin.peer_bases, table)
        del twin
        gc.collect()
        self.assertEqual(released, ["released"])
        # A map built without an adoption behind it is never usable.
        bare = AdoptedMap(peer_bases=table, local_rank=0, world_size=2, allocation_base=0x1000, allocation_bytes=256,
                          capabilities=1, host_bases=(0x1000, 0x2000))
        with self.assertRaisesRegex(ValueError, "was released"):
            bare.peer_bases

    def test_adopt_releases_what_it_adopted_when_a_later_step_fails(self):
        """adopt() after torch's adopt op succeeded: a failure of any later
        step (the table's own check, reading the table) releases the
        adoption before the error reaches the caller, so the storage is not
        left adopted with nothing to release it (a later adopt of it was
        refused as adopted already). Stand-in torch modules here, restored
        after: adopt needs a GPU."""
        import types

        from mori import address_map

        calls = []

        class Table:
            def __init__(self, bases, broken=False):
                self.bases, self.broken = bases, broken

            def tolist(self):
                if self.broken:
                    raise MemoryError("the table's copy to the host failed")
                return list(self.bases)

        class Storage:
            def data_ptr(self):
                return 0x1000

            def nbytes(self):
                return 256

        class Tensor:
            def untyped_storage(self):
                return Storage()

        state = {"table": None}
        ops = types.SimpleNamespace(mori=types.SimpleNamespace(
            adopt=lambda t, name: calls.append(("adopt", name)) or state["table"],
            release=lambda t, name: calls.append(("release", name))))
        fakes = {
            "torch": types.ModuleType("torch"),
            "torch.distributed": types.ModuleType("torch.distributed"),
            "torch.distributed.distributed_c10d": types.ModuleType("torch.distributed.distributed_c10d"),
            "mori.allocator": types.ModuleType("mori.allocator"),
        }
        fakes["torch"].ops = ops
        fakes["torch"].distributed = fakes["torch.distributed"]
        fakes["torch.distributed"].get_rank = lambda group: 0
        fakes["torch.distributed"].distributed_c10d = fakes["torch.distributed.distributed_c10d"]
        fakes["torch.distributed.distributed_c10d"]._resolve_process_group = lambda name: name
        saved = {k: sys.modules.get(k) for k in fakes}
        sys.modules.update(fakes)
        try:
            # The table names another address for this rank than its storage's.
            state["table"] = Table([0x2000, 0x3000])
            with self.assertRaisesRegex(RuntimeError, "the table says 0x2000 for rank 0"):
                address_map.adopt(Tensor(), "g")
            self.assertEqual(calls, [("adopt", "g"), ("release", "g")])
            # The table cannot be read.
            calls.clear()
            state["table"] = Table([0x1000, 0x3000], broken=True)
            with self.assertRaisesRegex(MemoryError, "copy to the host"):
                address_map.adopt(Tensor(), "g")
            self.assertEqual(calls, [("adopt", "g"), ("release", "g")])
            # And when nothing fails, the map holds the adoption until release().
            calls.clear()
            state["table"] = Table([0x1000, 0x3000])
            m = address_map.adopt(Tensor(), "g")
            self.assertEqual((m.host_bases, calls), ((0x1000, 0x3000), [("adopt", "g")]))
            m.release()
            self.assertEqual(calls, [("adopt", "g"), ("release", "g")])
        finally:
            for k, v in saved.items():
                if v is None:
                    sys.modules.pop(k, None)
                else:
                    sys.modules[k] = v

if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "pe":
        pe_main(int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], int(sys.argv[5]))
    else:
        unittest.main()
