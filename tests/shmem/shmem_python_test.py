# SPDX-License-Identifier: MIT
"""mori.shmem (the ctypes package over libmori.so) across separate
processes on the host platform, at 2, 4 and 8 PEs: the unique-ID init
through a file as in the Shmem Guide, every call, errors as ShmemError, and
no torch imported on the way."""
import ctypes
import os
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


def pe_main(rank, size, uid_path):
    """One PE: what the guide's quick reference does, checked."""
    from mori import shmem

    assert "torch" not in sys.modules, "importing mori.shmem imported torch"
    try:
        shmem.shmem_mype()
        raise AssertionError("shmem_mype before init did not raise")
    except shmem.ShmemError as e:
        assert e.name == "MORI_ENOT_INITIALIZED", e
    uid = share_unique_id(shmem, rank, uid_path)
    assert len(uid) == 128
    try:
        shmem.shmem_init_attr(shmem.MORI_SHMEM_INIT_WITH_UNIQUEID, rank, size, uid[:100])
        raise AssertionError("a 100-byte unique ID was accepted")
    except shmem.ShmemError as e:
        assert "100 bytes" in str(e), e
    shmem.shmem_init_attr(shmem.MORI_SHMEM_INIT_WITH_UNIQUEID, rank, size, uid)
    me, n = shmem.shmem_mype(), shmem.shmem_npes()
    assert (me, n) == (rank, size), (me, n)
    assert shmem.shmem_num_qp_per_pe() == 1
    ptr = shmem.shmem_malloc(8 * n)
    aligned = shmem.shmem_malloc_align(1 << 16, 4096)
    assert aligned % (1 << 16) == 0
    flagged = shmem.shmem_ext_malloc_with_flags(4096, shmem.MORI_SHMEM_MALLOC_DEFAULT)
    for pe in range(n):
        peer = shmem.shmem_ptr_p2p(ptr, me, pe)
        assert peer, f"PE {pe} not reachable"
        ctypes.c_uint64.from_address(peer + 8 * me).value = 1000 * me + pe
    shmem.shmem_barrier_all()
    got = [ctypes.c_uint64.from_address(ptr + 8 * w).value for w in range(n)]
    assert got == [1000 * w + me for w in range(n)], got
    assert shmem.shmem_ptr_p2p(ptr, me, n) == 0  # out of range: 0, as the guide says
    # A process forked from a PE (a multiprocessing worker) is no PE: its
    # collective call is refused, naming both processes, instead of taking
    # the PE's place in the other PEs' step (they paired with it, and the
    # PE's own next call with their next one). The PE goes on unharmed.
    child = os.fork()
    if child == 0:
        try:
            shmem.shmem_barrier_all()
            code = 3
        except shmem.ShmemError as e:
            code = 0 if f"process {os.getppid()}" in str(e) and f"process {os.getpid()}" in str(e) else 4
            if code:
                print(f"PE {me}'s child: {e}", flush=True)
        os._exit(code)
    _, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == 0, f"PE {me}'s forked child: exit {os.waitstatus_to_exitcode(status)}"
    shmem.shmem_barrier_all()
    # Integers are checked before ctypes, which would wrap them: PE 2**32 + p
    # is not PE p, 2**64 bytes are not 0 bytes (refused on every PE alike,
    # before the collective, so nothing is left half done).
    for pe in range(n):
        try:
            shmem.shmem_ptr_p2p(ptr, me, 2**32 + pe)
            raise AssertionError(f"dest_pe 2**32 + {pe} was accepted")
        except ValueError as e:
            assert f"shmem_ptr_p2p: dest_pe {2**32 + pe} " in str(e), e
        try:
            shmem.shmem_translate(ptr, 2**32 + pe)
            raise AssertionError(f"shmem_translate to PE 2**32 + {pe} was accepted")
        except ValueError as e:
            assert f"shmem_translate: pe {2**32 + pe} " in str(e), e
    for size in (2**64, -1):
        try:
            shmem.shmem_malloc(size)
            raise AssertionError(f"shmem_malloc({size}) was accepted")
        except ValueError as e:
            assert f"shmem_malloc: size {size} " in str(e), e
    try:
        shmem.shmem_malloc_align(3000, 64)
        raise AssertionError("alignment 3000 was accepted")
    except shmem.ShmemError as e:
        assert e.code == -22 and "alignment 3000" in str(e), e
    try:
        shmem.shmem_module_init(12345)
        raise AssertionError("module init on the host platform")
    except shmem.ShmemError as e:
        assert e.name == "MORI_ENOTSUP", e
    shmem.shmem_barrier_all()
    # An argument refused on one PE only (Python's checks, before C): that
    # PE still takes its part of the collective call, failing it, so every
    # PE's call fails at once naming it, and the next calls pair as they
    # should (the others' call used to pair with that PE's next one).
    last = n - 1
    import mmap

    fd = os.memfd_create("mori_register_refused")
    os.ftruncate(fd, 1 << 16)
    mapping = mmap.mmap(fd, 1 << 16)
    os.close(fd)
    buf = ctypes.addressof(ctypes.c_char.from_buffer(mapping))
    for call, bad, good, says in (
            (shmem.shmem_malloc, lambda: shmem.shmem_malloc(64.0), lambda: shmem.shmem_malloc(64), "64.0"),
            (shmem.shmem_malloc_align, lambda: shmem.shmem_malloc_align(4096, -1),
             lambda: shmem.shmem_malloc_align(4096, 64), "size -1"),
            (shmem.shmem_free, lambda: shmem.shmem_free(float(flagged)), lambda: shmem.shmem_free(flagged), "float"),
            (shmem.shmem_buffer_register, lambda: shmem.shmem_buffer_register(buf, 2**64),
             lambda: shmem.shmem_buffer_register(buf, 1 << 16), str(2**64))):
        try:
            (bad if me == last else good)()
            raise AssertionError(f"{call.__name__}: refused on PE {last} only, but it returned on PE {me}")
        except (TypeError, ValueError) as e:
            assert me == last and says in str(e), (me, e)
        except shmem.ShmemError as e:
            assert me != last and f"PE {last} refused its arguments" in str(e) and says in str(e), (me, e)
    shmem.shmem_buffer_register(buf, 1 << 16)  # in step, and nothing was registered before
    shmem.shmem_buffer_deregister(buf, 1 << 16)
    again = shmem.shmem_malloc(8 * n)  # in step: every PE's next call is this one
    for pe in range(n):
        ctypes.c_uint64.from_address(shmem.shmem_ptr_p2p(again, me, pe) + 8 * me).value = 7 * me + pe
    shmem.shmem_barrier_all()
    assert [ctypes.c_uint64.from_address(again + 8 * w).value for w in range(n)] == [7 * w + me for w in range(n)]
    # An address map's table goes with its allocation: after shmem_free its
    # peer_bases says so (it read the released table).
    from mori.address_map import shmem_address_map

    amap = shmem_address_map(again)
    shmem.shmem_free(again)
    try:
        amap.peer_bases
        raise AssertionError("peer_bases of a freed allocation")
    except shmem.ShmemError as e:
        assert "was freed" in str(e), e
    for p in (ptr, aligned, flagged):
        shmem.shmem_free(p)
    try:
        shmem.shmem_free(ptr)
        raise AssertionError("double free accepted")
    except shmem.ShmemError as e:
        assert "double free" in str(e), e
    # mori.finalize ends what shmem started (no shmem_finalize first),
    # twice; shmem_finalize after it is still harmless.
    import mori

    mori.finalize()
    mori.finalize()
    try:
        shmem.shmem_mype()
        raise AssertionError("shmem_mype after mori.finalize did not raise")
    except shmem.ShmemError as e:
        assert e.name == "MORI_ENOT_INITIALIZED", e
    shmem.shmem_finalize()
    print(f"PE {me} of {n}: ok", flush=True)


def two_nodes_pe_main(rank, size, uid_path):
    """One PE of a job on two (simulated) nodes: the rdma transport is
    listed and, the other node's PEs being unreachable otherwise, opened."""
    from mori import shmem

    uid = share_unique_id(shmem, rank, uid_path)
    shmem.shmem_init_attr(shmem.MORI_SHMEM_INIT_WITH_UNIQUEID, rank, size, uid)
    ptr = shmem.shmem_malloc(4096)
    other = (rank + size // 2) % size  # with two nodes, the same place on the other one
    reached = shmem.shmem_ptr_p2p(ptr, rank, other) != 0
    assert reached == (os.environ["NODES"] == "1"), reached
    shmem.shmem_barrier_all()
    shmem.shmem_free(ptr)
    shmem.shmem_finalize()
    print(f"PE {rank} of {size}: ok", flush=True)


def run_python(code, **env):
    """(exit code, output) of `code` in a fresh interpreter that finds the
    package here (a variable given as None is unset there)."""
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"), **env)
    env = {k: v for k, v in env.items() if v is not None}
    p = subprocess.run([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, timeout=60)
    return p.returncode, p.stdout


class ShmemPythonTest(unittest.TestCase):
    def test_every_call_at_2_4_and_8_pes(self):
        env = dict(os.environ, MORI_SHMEM_VMM_CHUNK_SIZE="4M", MORI_SHMEM_HEAP_SIZE="64M",
                   MORI_BOOTSTRAP_TIMEOUT_MS="20000")
        for n in (2, 4, 8):
            with tempfile.TemporaryDirectory(dir=os.environ.get("TEST_TMPDIR")) as tmp:
                uid_path = os.path.join(tmp, "uid")
                procs = [subprocess.Popen([sys.executable, __file__, "pe", str(r), str(n), uid_path], env=env,
                                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
                         for r in range(n)]
                outs = [p.communicate(timeout=120)[0] for p in procs]
                for r, (p, out) in enumerate(zip(procs, outs)):
                    self.assertEqual(p.returncode, 0, f"PE {r} of {n}:\n{out}")
                    self.assertIn(f"PE {r} of {n}: ok", out)
                # The unique ID is a secret: the file that carried it is this user's alone.
                self.assertEqual(os.stat(uid_path).st_mode & 0o777, 0o600)

    def test_pes_on_two_nodes_open_the_rdma_transport(self):
        """mori.shmem lists the rdma transport (optional: opened only when a
        PE is on another node), so a job across nodes has it; where it finds
        no device, each PE says so and warns which PEs nothing reaches. On
        one node it is not opened at all."""
        for n, nodes in ((2, 2), (4, 2), (2, 1)):
            with tempfile.TemporaryDirectory(dir=os.environ.get("TEST_TMPDIR")) as tmp:
                uid_path = os.path.join(tmp, "uid")
                procs = []
                for r in range(n):
                    env = dict(os.environ, MORI_SHMEM_HEAP_SIZE="64M", MORI_BOOTSTRAP_TIMEOUT_MS="20000",
                               MORI_GLOBAL_LOG_LEVEL="INFO", MORI_HOST_ID=f"node-{r * nodes // n}",
                               MORI_RDMA_DEVICES="no-such-nic", NODES=str(nodes))
                    procs.append(subprocess.Popen([sys.executable, __file__, "two_nodes", str(r), str(n), uid_path],
                                                  env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
                outs = [p.communicate(timeout=120)[0] for p in procs]
                for r, (p, out) in enumerate(zip(procs, outs)):
                    what = f"PE {r} of {n} on {nodes} node(s):\n{out}"
                    self.assertEqual(p.returncode, 0, what)
                    self.assertIn(f"PE {r} of {n}: ok", out)
                    if nodes == 2:
                        self.assertIn("optional transport rdma initialised", out, what)
                        self.assertIn("has no usable RDMA device", out, what)
                        self.assertIn(f"shmem: PE {r} reaches {n // 2} PE(s) by no transport", out, what)
                    else:
                        self.assertNotIn("rdma", out, what)
                        self.assertNotIn("by no transport", out, what)

    def test_import_mori_then_any_subpackage(self):
        """The guide's `import mori` then `mori.shmem.X`: each public
        subpackage is imported when first named, not by `import mori`
        (which still loads no library and no torch)."""
        code, out = run_python(
            "import sys, mori\n"
            "names = ('address_map', 'allocator', 'info', 'ops', 'shmem', 'triton', 'triton_lib')\n"
            "loaded = sorted(m for m in sys.modules if m.startswith('mori.') and m != 'mori._version')\n"
            "assert not loaded, f'import mori imported {loaded}'\n"
            "assert not set(names) & set(dir(mori)), dir(mori)  # help(mori) and the like import nothing\n"
            "dir(mori); import inspect; inspect.getmembers(mori)\n"
            "loaded = sorted(m for m in sys.modules if m.startswith('mori.') and m != 'mori._version')\n"
            "assert not loaded, f'listing mori imported {loaded}'\n"
            "try:\n    mori.shmem.shmem_mype()\nexcept mori.shmem.ShmemError as e:\n    print('MYPE', e.name)\n"
            "print('SHMEM', mori.shmem is sys.modules['mori.shmem'])\n"
            "print('MAP', mori.address_map.shmem_translate is mori.shmem.shmem_translate)\n"
            "print('TORCH', 'torch' in sys.modules)\n"
            "print('OPS', mori.ops.__name__, 'INFO', callable(mori.info.report))\n"
            "try:\n    print('TRITON ok', mori.triton.__name__)\n"
            "except ModuleNotFoundError as e:\n    print('TRITON missing', e.name)\n"
            "try:\n    mori.allocator\nexcept ImportError as e:\n    print('ALLOCATOR', e)\n"
            "try:\n    mori.nothing\nexcept AttributeError as e:\n    print('NOTHING', e)\n")
        self.assertEqual(code, 0, out)
        self.assertIn("MYPE MORI_ENOT_INITIALIZED", out)
        self.assertIn("SHMEM True", out)
        self.assertIn("MAP True", out)
        self.assertIn("TORCH False", out)
        self.assertIn("OPS mori.ops INFO True", out)
        self.assertRegex(out, r"TRITON (ok mori\.triton|missing triton)")
        self.assertIn("ALLOCATOR mori.allocator: mori's platform is host", out)
        self.assertIn("NOTHING module 'mori' has no attribute 'nothing'", out)

    def test_integers_are_checked_before_c(self):
        """Every integer a wrapper hands to C is checked against its C type
        first (ctypes would wrap it): ValueError out of range, TypeError for
        a non-int, naming the call, the argument and the value."""
        from mori import shmem

        uid, uniq, mpi = bytes(128), shmem.MORI_SHMEM_INIT_WITH_UNIQUEID, shmem.MORI_SHMEM_INIT_WITH_MPI_COMM
        size_t = "size_t (0 to 18446744073709551615)"
        int32 = "int (-2147483648 to 2147483647)"
        cases = [
            (shmem.shmem_malloc, (2**64, ), ValueError,
             f"shmem_malloc: size 18446744073709551616 is out of range for {size_t}"),
            (shmem.shmem_malloc, (-1, ), ValueError, f"shmem_malloc: size -1 is out of range for {size_t}"),
            (shmem.shmem_malloc, (1.5, ), TypeError, "shmem_malloc: size must be an int, not float (1.5)"),
            (shmem.shmem_malloc, (True, ), TypeError, "shmem_malloc: size must be an int, not bool (True)"),
            (shmem.shmem_malloc_align, (2**64, 64), ValueError, "shmem_malloc_align: alignment 18446744073709551616 "),
            (shmem.shmem_malloc_align, (64, -5), ValueError, "shmem_malloc_align: size -5 "),
            (shmem.shmem_ext_malloc_with_flags, (64, 2**32), ValueError,
             "shmem_ext_malloc_with_flags: flags 4294967296 is out of range for unsigned int (0 to 4294967295)"),
            (shmem.shmem_ext_malloc_with_flags, (-64, 0), ValueError, "shmem_ext_malloc_with_flags: size -64 "),
            (shmem.shmem_ext_malloc_with_flags, (64, "0"), TypeError,
             "shmem_ext_malloc_with_flags: flags must be an int"),
            (shmem.shmem_free, (-4096, ), ValueError, "shmem_free: ptr -4096 is out of range for a pointer"),
            (shmem.shmem_free, (2**64, ), ValueError, "shmem_free: ptr 18446744073709551616 "),
            (shmem.shmem_free, ("0x1000", ), TypeError, "shmem_free: ptr must be an int, not str ('0x1000')"),
            (shmem.shmem_buffer_register, (4096, 2**64), ValueError,
             "shmem_buffer_register: size 18446744073709551616 "),
            (shmem.shmem_buffer_register, (-1, 64), ValueError, "shmem_buffer_register: ptr -1 "),
            (shmem.shmem_buffer_deregister, (4096, -1), ValueError, "shmem_buffer_deregister: size -1 "),
            (shmem.shmem_buffer_deregister, (2**65, 64), ValueError, f"shmem_buffer_deregister: ptr {2**65} "),
            (shmem.shmem_ptr_p2p, (4096, 2**32, 0), ValueError,
             f"shmem_ptr_p2p: my_pe 4294967296 is out of range for {int32}"),
            (shmem.shmem_ptr_p2p, (4096, 0, -2**31 - 1), ValueError, "shmem_ptr_p2p: dest_pe -2147483649 "),
            (shmem.shmem_ptr_p2p, (4096, 0, 1.0), TypeError, "shmem_ptr_p2p: dest_pe must be an int, not float"),
            (shmem.shmem_ptr_p2p, (2**64 + 4096, 0, 0), ValueError, f"shmem_ptr_p2p: ptr {2**64 + 4096} "),
            (shmem.shmem_init_attr, (uniq, 2**32, 2, uid), ValueError,
             f"shmem_init_attr: rank 4294967296 is out of range for {int32}"),
            (shmem.shmem_init_attr, (uniq, 0, 2**31, uid), ValueError, "shmem_init_attr: world_size 2147483648 "),
            (shmem.shmem_init_attr, (2**32 + uniq, 0, 2, uid), ValueError, "shmem_init_attr: flags 4294967297 "),
            (shmem.shmem_init_attr, (-1, 0, 2, uid), ValueError, "shmem_init_attr: flags -1 "),
            (shmem.shmem_init_attr, ("1", 0, 2, uid), TypeError, "shmem_init_attr: flags must be an int, not str"),
            (shmem.shmem_init_attr, (uniq, 0.0, 2, uid), TypeError, "shmem_init_attr: rank must be an int, not float"),
            (shmem.shmem_init_attr, (mpi, 0, 2, -8), ValueError, "shmem_init_attr: arg (the MPI_Comm handle) -8 "),
            (shmem.shmem_module_init, (2**64, ), ValueError,
             "shmem_module_init: module_handle 18446744073709551616 "),
            (shmem.shmem_module_init, (b"", ), TypeError,
             "shmem_module_init: module_handle must be an int, not bytes"),
        ]
        for fn, args, kind, says in cases:
            with self.subTest(call=fn.__name__, args=args):
                with self.assertRaises(kind) as caught:
                    fn(*args)
                self.assertIn(says, str(caught.exception))
        # The bounds themselves pass the check (and reach the library:
        # nothing is initialised here), as do ints of other kinds.
        class Index:
            def __index__(self):
                return 4096

        with self.assertRaises(shmem.ShmemError) as caught:
            shmem.shmem_malloc(2**64 - 1)
        self.assertEqual(caught.exception.name, "MORI_ENOT_INITIALIZED")
        with self.assertRaises(shmem.ShmemError):
            shmem.shmem_malloc(Index())
        self.assertEqual(shmem.shmem_ptr_p2p(Index(), 2**31 - 1, -2**31), 0)
        with self.assertRaises(shmem.ShmemError) as caught:
            shmem.shmem_init_attr(uniq, 2**31 - 1, 2**31 - 1, uid)  # a valid range; the all-zero ID is refused
        self.assertNotIn("out of range", str(caught.exception))

    def test_the_guides_program_keeps_the_unique_id_private(self):
        """docs/shmem.md's complete program writes the unique ID, which
        carries the job's secret, in a file only its user may read, as
        docs/security.md says the examples do (mode 600 whatever the umask;
        it was created 644: readable by every local user). Run as a job of
        one PE, with its unlink kept back so that the file can be looked at."""
        import re

        with open(os.path.join(ROOT, "docs", "shmem.md")) as f:
            code = re.search(r"<!-- runnable ranks=2 -->\n```python\n(.*?)```", f.read(), re.S).group(1)
        path = f"/tmp/mori_uid_{os.getpid()}"  # the program's, its parent being this process
        wrapper = ("import os\nos.umask(0o022)\nunlink, os.unlink = os.unlink, lambda p: None\n"
                   f"exec(compile({code!r}, 'docs/shmem.md', 'exec'))\n"
                   f"print('mode', oct(os.stat({path!r}).st_mode & 0o777))\nunlink({path!r})\n")
        try:
            rc, out = run_python(wrapper, MORI_RANK="0", MORI_WORLD_SIZE="1")
        finally:
            if os.path.exists(path):
                os.unlink(path)
        self.assertEqual(rc, 0, out)
        self.assertIn("mode 0o600", out)

    def test_what_differs_from_the_guide(self):
        """docs/shmem.md lists, under "What differs from the guide", what the
        library does: one PE per process (a second init, from another
        thread, is MORI_EEXIST), no shmem under MORI_SHMEM_MODE=isolation
        (MORI_ENOTSUP), WARN as the default log level; and MORI_PRECOMPILE /
        MORI_DISABLE_JIT as mori.triton.lib's, not as missing."""
        code = ("import sys, threading\n"
                "from mori import shmem\n"
                "init = lambda: shmem.shmem_init_attr(shmem.MORI_SHMEM_INIT_WITH_UNIQUEID, 0, 1, "
                "shmem.shmem_get_unique_id())\n"
                "try:\n    init()\nexcept shmem.ShmemError as e:\n    print('INIT', e.name, e)\n"
                "    raise SystemExit(0)\n"
                "def second():\n"
                "    try:\n        init()\n    except shmem.ShmemError as e:\n        print('THREAD', e.name, e)\n"
                "t = threading.Thread(target=second)\nt.start()\nt.join()\n"
                "print('STILL PE', shmem.shmem_mype(), 'OF', shmem.shmem_npes())\n"
                "shmem.shmem_finalize()\n")
        quiet = dict(MORI_SHMEM_HEAP_SIZE="64M", MORI_GLOBAL_LOG_LEVEL=None, MORI_LOG_LEVEL=None)
        rc, out = run_python(code, **quiet)
        self.assertEqual(rc, 0, out)
        self.assertIn("THREAD MORI_EEXIST shmem_init_attr: MORI_EEXIST: shmem_init_attr: already initialised as PE 0 "
                      "of 1", out)
        self.assertIn("STILL PE 0 OF 1", out)
        self.assertNotIn("INFO", out)  # WARN by default
        rc, out = run_python(code, **dict(quiet, MORI_GLOBAL_LOG_LEVEL="INFO"))
        self.assertEqual(rc, 0, out)
        self.assertIn("INFO pid", out)
        self.assertIn("shmem: PE 0 of 1", out)
        rc, out = run_python(code, **dict(quiet, MORI_SHMEM_MODE="isolation"))
        self.assertEqual(rc, 0, out)
        self.assertIn("INIT MORI_ENOTSUP", out)
        self.assertIn("shmem needs the symmetric heap (MORI_SHMEM_MODE static or vmm)", out)

        with open(os.path.join(ROOT, "docs", "shmem.md")) as f:
            doc = f.read()
        differs = doc.split("## What differs from the guide", 1)[1].split("\n## ", 1)[0]
        for says in ("**One PE per process.**", "`MORI_EEXIST`", "`MORI_SHMEM_MODE=isolation`", "`MORI_ENOTSUP`",
                     "defaults to `WARN`", "`MORI_GLOBAL_LOG_LEVEL=INFO`", "`MORI_PRECOMPILE`", "`MORI_DISABLE_JIT`",
                     "`mori.triton.lib`"):
            self.assertIn(says, differs)
        self.assertNotIn("Not implemented", doc)

    def test_version_platform_and_finalize_before_anything(self):
        """`import mori` loads no library; finalize() then loads none either;
        __version__ is the build's (from bazel/version.bzl) and platform() the
        library's, logged at INFO."""
        code, out = run_python(
            "import logging, sys, mori\n"
            "logging.basicConfig(level=logging.INFO, format='%(name)s %(levelname)s %(message)s')\n"
            "assert 'mori._lib' not in sys.modules, 'import mori loaded the library'\n"
            "mori.finalize()\n"
            "assert 'mori._lib' not in sys.modules, 'mori.finalize loaded the library'\n"
            "print('VERSION', mori.__version__, 'PLATFORM', mori.platform())\n"
            "mori.finalize(); mori.finalize()\n")
        self.assertEqual(code, 0, out)
        self.assertRegex(out, r"VERSION \d+\.\d+\.\d+ PLATFORM host")
        self.assertRegex(out, r"mori INFO mori: platform host \(MORI_LIB is set\): .*libmori\.so")

    def test_platform_asked_for_is_checked(self):
        """MORI_PLATFORM must name a platform, and the one MORI_LIB was built for."""
        code, out = run_python("import mori.shmem", MORI_PLATFORM="tpu")
        self.assertNotEqual(code, 0, out)
        self.assertIn("MORI_PLATFORM='tpu'; expected one of host, cuda, hip", out)
        code, out = run_python("import mori.shmem", MORI_PLATFORM="cuda")
        self.assertNotEqual(code, 0, out)
        self.assertIn("MORI_PLATFORM=cuda but", out)
        self.assertIn("is a build for host", out)
        code, out = run_python("import mori.shmem; print(mori.platform())", MORI_PLATFORM="HOST")
        self.assertEqual((code, out.split()[-1:]), (0, ["host"]), out)

    def test_allocator_refuses_the_host_platform(self):
        """The torch backend is GPU-only: on host, a clear ImportError before
        torch is even imported."""
        code, out = run_python("import sys\ntry:\n    import mori.allocator\nexcept ImportError as e:\n"
                               "    print('IMPORTERROR', e, 'torch' in sys.modules)\n    raise SystemExit(3)\n")
        self.assertEqual(code, 3, out)
        self.assertIn("mori.allocator: mori's platform is host", out)
        self.assertTrue(out.strip().endswith("False"), out)

    def test_loader_in_a_wheel_layout(self):
        """The loader over a package laid out as the wheel (mori/lib/<platform>/),
        MORI_LIB unset: no visible GPU picks host and says why; an asked-for
        platform that is missing, or whose library is another platform's
        build, is an ImportError naming it; no library at all names the fix."""
        import shutil

        with tempfile.TemporaryDirectory(dir=os.environ.get("TEST_TMPDIR")) as tmp:
            shutil.copytree(os.path.join(ROOT, "python", "mori"), os.path.join(tmp, "mori"))
            code = ("import logging, sys\n"
                    "logging.basicConfig(level=logging.INFO, format='%(name)s %(levelname)s %(message)s')\n"
                    "import mori\n"
                    "try:\n    print('PLATFORM', mori.platform())\n"
                    "except ImportError as e:\n    print('IMPORTERROR', e)\n")

            def load(**env):
                env = dict(os.environ, PYTHONPATH=tmp, CUDA_VISIBLE_DEVICES="", HIP_VISIBLE_DEVICES="", **env)
                env.pop("MORI_LIB")
                p = subprocess.run([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT, text=True, timeout=60)
                self.assertEqual(p.returncode, 0, p.stdout)
                return p.stdout

            out = load()
            self.assertIn("IMPORTERROR mori: no libmori.so in", out)
            self.assertIn("set MORI_LIB", out)
            for platform in ("host", "cuda"):  # the "cuda" one is the host build: a mismatch to catch
                os.makedirs(os.path.join(tmp, "mori", "lib", platform))
                shutil.copy(os.environ["MORI_LIB"], os.path.join(tmp, "mori", "lib", platform, "libmori.so"))
            out = load()
            self.assertIn("PLATFORM host", out)
            self.assertRegex(out, r"mori INFO mori: platform host \((no CUDA driver|CUDA_VISIBLE_DEVICES='' hides)")
            self.assertIn("/mori/lib/host/libmori.so", out)
            out = load(MORI_PLATFORM="hip")
            self.assertIn("IMPORTERROR mori: MORI_PLATFORM=hip but this installation has no hip build of libmori.so "
                          "(it has: host, cuda", out)
            out = load(MORI_PLATFORM="cuda")
            self.assertRegex(out, r"IMPORTERROR mori: MORI_PLATFORM=cuda but \S+/mori/lib/cuda/libmori\.so is a "
                                  r"build for host")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "pe":
        pe_main(int(sys.argv[2]), int(sys.argv[3]), sys.argv[4])
    elif len(sys.argv) > 1 and sys.argv[1] == "two_nodes":
        two_nodes_pe_main(int(sys.argv[2]), int(sys.argv[3]), sys.argv[4])
    else:
        unittest.main()
