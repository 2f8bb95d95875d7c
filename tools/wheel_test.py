# SPDX-License-Identifier: MIT
"""Checks an installed mori wheel on a machine without a GPU (CI); run by
tools/wheel_test.sh with the python of the virtual environment the wheel was
installed into. Every import runs in a fresh interpreter, so a crash is a
failure, not a lost test run.

    python wheel_test.py [--torch-dir DIR] [-v]

--torch-dir: a torch installation (a site-packages-like directory holding
torch and its .dist-info; more directories joined with os.pathsep) whose GPU
runtime libraries are absent here: `import mori.allocator` must then fail
with mori's clear ImportError.
"""
import argparse
import os
import subprocess
import sys
import tempfile
import textwrap
import unittest

def run(code, extra_path=()):
    """Runs `code` in a fresh interpreter, with extra_path in front of
    sys.path and outside the source tree (so only the installed mori is
    found); returns (exit code, output)."""
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    for var in ("MORI_LIB", "MORI_TORCH_LIB"):
        env.pop(var, None)  # the installed layout, no overrides
    if extra_path:
        env["PYTHONPATH"] = os.pathsep.join(extra_path)
    p = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env, cwd=tempfile.gettempdir(),
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120)
    return p.returncode, p.stdout


def fake_torch(root, version, cuda="13.0", hip=None, devices=0):
    """A stand-in torch package (version metadata, torch.version, and
    torch.cuda.device_count) for the checks mori makes before loading its
    library."""
    pkg = os.path.join(root, "torch")
    os.makedirs(os.path.join(pkg, "cuda"))
    with open(os.path.join(pkg, "__init__.py"), "w") as f:
        f.write(f"__version__ = {version!r}\nfrom . import cuda, version\n")
    with open(os.path.join(pkg, "version.py"), "w") as f:
        f.write(f"__version__ = {version!r}\ncuda = {cuda!r}\nhip = {hip!r}\n")
    with open(os.path.join(pkg, "cuda", "__init__.py"), "w") as f:
        f.write(f"def device_count():\n    return {devices}\n")
    info = os.path.join(root, f"torch-{version}.dist-info")
    os.makedirs(info)
    with open(os.path.join(info, "METADATA"), "w") as f:
        f.write(f"Metadata-Version: 2.1\nName: torch\nVersion: {version}\n")
    return root


IMPORT_ALLOCATOR = """
    try:
        import mori.allocator
    except ImportError as e:
        print("IMPORTERROR", e)
        raise SystemExit(3)
    print("IMPORTED")
"""


class InstalledWheel(unittest.TestCase):
    def test_files_match_record(self):
        """Every file the wheel installed has the size and sha256 its RECORD says."""
        code, out = run("""
            import base64, hashlib
            from importlib.metadata import files
            n = 0
            for f in files("mori"):
                if not f.hash:
                    continue
                data = f.locate().read_bytes()
                digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
                assert (digest, len(data)) == (f.hash.value, f.size), f
                n += 1
            names = {str(f) for f in files("mori")}
            for need in ("mori/libmori.so", "mori/libmori_torch.so", "mori/_build_info.py", "mori/shmem/api.py"):
                assert need in names, need
            print("RECORD OK", n)
        """)
        self.assertEqual(code, 0, out)
        self.assertIn("RECORD OK", out)

    def test_backend_finds_libmori_next_to_it(self):
        """libmori_torch.so resolves libmori.so to the package's own copy."""
        code, out = run("import mori, os; print(os.path.dirname(mori.__file__))")
        self.assertEqual(code, 0, out)
        pkg = out.strip().splitlines()[-1]
        ldd = subprocess.run(["ldd", os.path.join(pkg, "libmori_torch.so")], stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True).stdout
        line = [l for l in ldd.splitlines() if "libmori.so" in l]
        self.assertTrue(line and os.path.join(pkg, "libmori.so") in line[0], ldd)

    def test_shmem_unique_id_without_torch(self):
        """mori.shmem imports without torch, makes a unique ID, and, with no
        GPU here, a 1-PE init fails with MORI_ENO_GPU (not a crash)."""
        code, out = run("""
            import sys
            from mori import shmem
            uid = shmem.shmem_get_unique_id()
            assert isinstance(uid, bytes) and len(uid) == 128, uid
            try:
                shmem.shmem_init_attr(shmem.MORI_SHMEM_INIT_WITH_UNIQUEID, 0, 1, uid)
                shmem.shmem_finalize()
                print("INIT OK")
            except shmem.ShmemError as e:
                print("INIT", e.name, e)
            assert "torch" not in sys.modules, "mori.shmem imported torch"
            print("UNIQUE ID OK")
        """)
        self.assertEqual(code, 0, out)
        self.assertIn("UNIQUE ID OK", out)
        self.assertIn("INIT MORI_ENO_GPU", out)

    def test_build_info_records_torch_from_headers(self):
        code, out = run("from mori import _build_info as b; print(b.TORCH_VERSION, b.PLATFORM)")
        self.assertEqual(code, 0, out)
        version, platform = out.split()
        self.assertRegex(version, r"^\d+\.\d+\.\d+$")
        self.assertIn(platform, ("cuda", "rocm"))

    def test_allocator_other_torch_minor(self):
        """Another torch minor: an ImportError naming both versions."""
        _, built = run("from mori import _build_info as b; print(b.TORCH_VERSION)")
        built = built.strip()
        major, minor = built.split(".")[:2]
        other = f"{major}.{int(minor) - 1}.0"
        with tempfile.TemporaryDirectory() as d:
            code, out = run(IMPORT_ALLOCATOR, [fake_torch(d, other)])
        self.assertEqual(code, 3, out)
        self.assertIn(f"compiled against torch {built}", out)
        self.assertIn(f"torch {other} is installed", out)

    def test_allocator_cpu_only_torch(self):
        _, built = run("from mori import _build_info as b; print(b.TORCH_VERSION)")
        with tempfile.TemporaryDirectory() as d:
            code, out = run(IMPORT_ALLOCATOR, [fake_torch(d, built.strip() + "+cpu", cuda=None)])
        self.assertEqual(code, 3, out)
        self.assertIn("a CPU-only build", out)

    def test_allocator_no_gpu(self):
        """torch loads but sees no GPU: a clear ImportError."""
        _, built = run("from mori import _build_info as b; print(b.TORCH_VERSION, b.PLATFORM)")
        version, platform = built.split()
        kw = {"hip": "7.0", "cuda": None} if platform == "rocm" else {}
        with tempfile.TemporaryDirectory() as d:
            code, out = run(IMPORT_ALLOCATOR, [fake_torch(d, version, **kw)])
        self.assertEqual(code, 3, out)
        self.assertIn("sees no GPU", out)

    def test_allocator_real_torch_without_gpu_libraries(self):
        """The real torch, without its GPU runtime libraries: mori's clear
        ImportError naming torch's own failure, not a crash."""
        torch_path = os.environ.get("MORI_WHEEL_TEST_TORCH_DIR")
        if not torch_path:
            self.skipTest("no torch installation given (--torch-dir)")
        torch_path = torch_path.split(os.pathsep)
        code, out = run(IMPORT_ALLOCATOR, torch_path)
        self.assertEqual(code, 3, out)
        self.assertIn("mori.allocator needs torch", out)
        self.assertIn("`import torch` failed", out)
        # With torch's own Python dependencies there, what fails is loading
        # its GPU libraries.
        if run("import typing_extensions", torch_path)[0] == 0:
            self.assertIn("cannot open shared object file", out)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--torch-dir")
    a, rest = ap.parse_known_args()
    if a.torch_dir:
        os.environ["MORI_WHEEL_TEST_TORCH_DIR"] = os.path.abspath(a.torch_dir)
    unittest.main(argv=[sys.argv[0]] + rest)
