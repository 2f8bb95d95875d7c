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


def run_python(code, **env):
    """(exit code, output) of `code` in a fresh interpreter that finds the
    package here."""
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"), **env)
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
    else:
        unittest.main()
