# SPDX-License-Identifier: MIT
"""Checks an installed mori wheel on a machine without a GPU (CI); run by
tools/wheel_test.sh with the python of the virtual environment the wheel was
installed into. Every import runs in a fresh interpreter, so a crash is a
failure, not a lost test run: the files against RECORD, the metadata
(licence, requires-python, classifiers, version), the host platform chosen
by itself with no GPU here and a real 2-PE mori.shmem job on it, the GPU
platform when asked for, and the torch backend's clear ImportErrors.

    python wheel_test.py [--torch-dir DIR] [-v]

--torch-dir: a torch installation (a site-packages-like directory holding
torch and its .dist-info; more directories joined with os.pathsep) whose GPU
runtime libraries are absent here: `import mori.allocator` must then fail
with mori's clear ImportError.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import textwrap
import unittest

def clean_env(extra_path=(), **extra):
    """The environment of a fresh interpreter that finds only the installed
    mori (no PYTHONPATH but extra_path, no library overrides), plus extra."""
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    for var in ("MORI_LIB", "MORI_TORCH_LIB", "MORI_PLATFORM"):
        env.pop(var, None)  # the installed layout, no overrides
    if extra_path:
        env["PYTHONPATH"] = os.pathsep.join(extra_path)
    env.update(extra)
    return env


def run(code, extra_path=(), **extra_env):
    """Runs `code` in a fresh interpreter, with extra_path in front of
    sys.path and outside the source tree (so only the installed mori is
    found); returns (exit code, output)."""
    p = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=clean_env(extra_path, **extra_env),
                       cwd=tempfile.gettempdir(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       timeout=120)
    return p.returncode, p.stdout


def gpu_platform():
    """The wheel's GPU platform as mori names it (cuda or hip)."""
    _, out = run("from mori import _build_info as b; print(b.PLATFORM)")
    return "hip" if out.strip() == "rocm" else "cuda"


# One PE of a MORI Shmem job, from the installed wheel alone: PE 0 hands the
# unique ID over in a file; every PE writes its number into each peer's
# symmetric buffer, and checks what the peers wrote into its own.
SHMEM_PE = """
import ctypes, logging, os, sys, time
logging.basicConfig(level=logging.INFO, format="%(name)s %(levelname)s %(message)s")
import mori
from mori import shmem
rank, size, uid_path = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
if rank == 0:
    uid = shmem.shmem_get_unique_id()
    with open(uid_path + ".part", "wb") as f:
        f.write(uid)
    os.rename(uid_path + ".part", uid_path)
else:
    deadline = time.time() + 30
    while not os.path.exists(uid_path) and time.time() < deadline:
        time.sleep(0.01)
    uid = open(uid_path, "rb").read()
shmem.shmem_init_attr(shmem.MORI_SHMEM_INIT_WITH_UNIQUEID, rank, size, uid)
me, n = shmem.shmem_mype(), shmem.shmem_npes()
ptr = shmem.shmem_malloc(8 * n)
for pe in range(n):
    peer = shmem.shmem_ptr_p2p(ptr, me, pe)
    assert peer, f"PE {pe} not reachable from PE {me}"
    ctypes.c_uint64.from_address(peer + 8 * me).value = 1000 * me + pe
shmem.shmem_barrier_all()
got = [ctypes.c_uint64.from_address(ptr + 8 * w).value for w in range(n)]
assert got == [1000 * w + me for w in range(n)], got
shmem.shmem_barrier_all()
shmem.shmem_free(ptr)
mori.finalize()
mori.finalize()
assert "torch" not in sys.modules, "mori.shmem imported torch"
print(f"PE {me} of {n} on {mori.platform()}: ok", flush=True)
"""


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
        """Every file the wheel installed has the size and sha256 its RECORD
        says, and the package holds a libmori.so per platform."""
        gpu = gpu_platform()
        code, out = run(f"""
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
            names = {{str(f) for f in files("mori")}}
            for need in ("mori/lib/host/libmori.so", "mori/lib/{gpu}/libmori.so", "mori/lib/{gpu}/libmori_torch.so",
                         "mori/_build_info.py", "mori/_version.py", "mori/_lib.py", "mori/address_map.py",
                         "mori/info.py", "mori/shmem/api.py", "mori/triton/__init__.py", "mori/triton/lib.py",
                         "mori/triton/bitcode/mori_triton_nvptx.bc", "mori/triton/bitcode/mori_triton_amdgcn.bc",
                         "mori/triton_lib.py"):
                assert need in names, need
            assert any(n.endswith(".dist-info/LICENSE") for n in names), "no LICENSE in the dist-info"
            print("RECORD OK", n)
        """)
        self.assertEqual(code, 0, out)
        self.assertIn("RECORD OK", out)

    def test_metadata(self):
        """Licence, requires-python, classifiers; mori.__version__ is the
        wheel's version without its platform label."""
        code, out = run("""
            from importlib.metadata import metadata, version
            import mori
            m = metadata("mori")
            print("LICENSE", m["License"])
            print("REQUIRES", m["Requires-Python"])
            print("CLASSIFIERS", "|".join(m.get_all("Classifier")))
            print("VERSIONS", version("mori"), mori.__version__)
        """)
        self.assertEqual(code, 0, out)
        self.assertIn("LICENSE MIT", out)
        self.assertRegex(out, r"REQUIRES >=3\.\d+")
        self.assertIn("License :: OSI Approved :: MIT License", out)
        self.assertIn("Operating System :: POSIX :: Linux", out)
        wheel_version, dunder = re.search(r"VERSIONS (\S+) (\S+)", out).groups()
        self.assertRegex(dunder, r"^\d+\.\d+\.\d+$")
        self.assertEqual(wheel_version.split("+")[0], dunder)

    def test_backend_finds_libmori_next_to_it(self):
        """libmori_torch.so resolves libmori.so to the package's own copy of
        the same GPU platform."""
        gpu = gpu_platform()
        code, out = run("import mori, os; print(os.path.dirname(mori.__file__))")
        self.assertEqual(code, 0, out)
        libdir = os.path.join(out.strip().splitlines()[-1], "lib", gpu)
        ldd = subprocess.run(["ldd", os.path.join(libdir, "libmori_torch.so")], stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True).stdout
        line = [l for l in ldd.splitlines() if "libmori.so" in l]
        self.assertTrue(line and os.path.join(libdir, "libmori.so") in line[0], ldd)

    def test_host_platform_chosen_without_a_gpu(self):
        """No GPU here: the host platform, chosen by itself, logged at INFO
        and answered by mori.platform(); the library is the packaged one."""
        code, out = run("""
            import logging
            logging.basicConfig(level=logging.INFO, format="%(name)s %(levelname)s %(message)s")
            import mori, mori.shmem
            from mori import _lib
            print("PLATFORM", mori.platform(), _lib.PATH)
        """)
        self.assertEqual(code, 0, out)
        self.assertRegex(out, r"mori INFO mori: platform host \(.+\): \S+/mori/lib/host/libmori\.so")
        self.assertRegex(out, r"PLATFORM host \S+/mori/lib/host/libmori\.so")

    def test_shmem_job_on_host_from_the_wheel(self):
        """A real 2-PE MORI Shmem job from the installed wheel alone (no
        MORI_LIB, no MORI_PLATFORM): init, malloc, stores into the peers,
        barrier, free, mori.finalize, without torch."""
        with tempfile.TemporaryDirectory() as tmp:
            script = os.path.join(tmp, "pe.py")
            with open(script, "w") as f:
                f.write(SHMEM_PE)
            env = clean_env(MORI_SHMEM_HEAP_SIZE="64M", MORI_BOOTSTRAP_TIMEOUT_MS="30000")
            procs = [subprocess.Popen([sys.executable, script, str(r), "2", os.path.join(tmp, "uid")], env=env,
                                      cwd=tmp, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
                     for r in range(2)]
            outs = [p.communicate(timeout=120)[0] for p in procs]
        for r, (p, out) in enumerate(zip(procs, outs)):
            self.assertEqual(p.returncode, 0, f"PE {r}:\n{out}")
            self.assertIn(f"PE {r} of 2 on host: ok", out)
            self.assertIn("mori INFO mori: platform host", out)

    def test_mori_info_from_the_wheel(self):
        """`python -m mori.info` from the installed wheel alone: the report
        of the packaged host library (no GPU here), text and JSON."""
        p = subprocess.run([sys.executable, "-m", "mori.info", "--json"], env=clean_env(()), cwd=tempfile.gettempdir(),
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120)
        self.assertEqual(p.returncode, 0, p.stdout)
        doc = json.loads(p.stdout)
        self.assertEqual(doc["platform"], "host")
        self.assertEqual({t["name"] for t in doc["transports"]}, {"p2p", "sdma", "rdma"})
        code, out = run("""
            import mori.info
            print(mori.info.report().splitlines()[0])
        """)
        self.assertEqual(code, 0, out)
        self.assertRegex(out, r"mori \d+\.\d+\.\d+, platform host")

    def test_gpu_platform_when_asked_without_a_gpu(self):
        """MORI_PLATFORM=<the GPU one>: its library loads (the driver is
        opened only when used), makes a unique ID, and a 1-PE init fails
        with MORI_ENO_GPU (not a crash)."""
        gpu = gpu_platform()
        code, out = run("""
            import sys
            import mori
            from mori import shmem
            print("PLATFORM", mori.platform())
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
        """, MORI_PLATFORM=gpu)
        self.assertEqual(code, 0, out)
        self.assertIn(f"PLATFORM {gpu}", out)
        self.assertIn("UNIQUE ID OK", out)
        self.assertIn("INIT MORI_ENO_GPU", out)

    def test_unknown_platform_asked(self):
        code, out = run("import mori.shmem", MORI_PLATFORM="tpu")
        self.assertNotEqual(code, 0, out)
        self.assertIn("MORI_PLATFORM='tpu'; expected one of host, cuda, hip", out)

    def test_ep_without_torch_says_it_needs_torch(self):
        """mori.ops imports without torch; its EP names say they need it."""
        code, out = run("""
            import importlib.util, sys
            if importlib.util.find_spec("torch"):
                print("torch is installed here"); sys.exit(0)
            import mori.ops
            try:
                mori.ops.EpDispatchCombineOp
            except ImportError as e:
                print("ImportError:", e); sys.exit(3)
        """)
        if "torch is installed here" in out:
            self.skipTest("the clean venv has torch")
        self.assertEqual(code, 3, out)
        self.assertIn("mori.ops.EpDispatchCombineOp needs torch", out)

    def test_allocator_on_the_host_platform(self):
        """mori.allocator is GPU-only: on host, a clear ImportError."""
        code, out = run(IMPORT_ALLOCATOR)
        self.assertEqual(code, 3, out)
        self.assertIn("mori.allocator: mori's platform is host", out)

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
            code, out = run(IMPORT_ALLOCATOR, [fake_torch(d, other)], MORI_PLATFORM=gpu_platform())
        self.assertEqual(code, 3, out)
        self.assertIn(f"compiled against torch {built}", out)
        self.assertIn(f"torch {other} is installed", out)

    def test_allocator_cpu_only_torch(self):
        _, built = run("from mori import _build_info as b; print(b.TORCH_VERSION)")
        with tempfile.TemporaryDirectory() as d:
            code, out = run(IMPORT_ALLOCATOR, [fake_torch(d, built.strip() + "+cpu", cuda=None)],
                            MORI_PLATFORM=gpu_platform())
        self.assertEqual(code, 3, out)
        self.assertIn("a CPU-only build", out)

    def test_allocator_no_gpu(self):
        """torch loads but sees no GPU: a clear ImportError."""
        _, built = run("from mori import _build_info as b; print(b.TORCH_VERSION, b.PLATFORM)")
        version, platform = built.split()
        kw = {"hip": "7.0", "cuda": None} if platform == "rocm" else {}
        with tempfile.TemporaryDirectory() as d:
            code, out = run(IMPORT_ALLOCATOR, [fake_torch(d, version, **kw)], MORI_PLATFORM=gpu_platform())
        self.assertEqual(code, 3, out)
        self.assertIn("sees no GPU", out)

    def test_allocator_real_torch_without_gpu_libraries(self):
        """The real torch, without its GPU runtime libraries: mori's clear
        ImportError naming torch's own failure, not a crash."""
        torch_path = os.environ.get("MORI_WHEEL_TEST_TORCH_DIR")
        if not torch_path:
            self.skipTest("no torch installation given (--torch-dir)")
        torch_path = torch_path.split(os.pathsep)
        code, out = run(IMPORT_ALLOCATOR, torch_path, MORI_PLATFORM=gpu_platform())
        self.assertEqual(code, 3, out)
        self.assertIn("mori.allocator needs torch", out)
        self.assertIn("`import torch` failed", out)
        # With torch's own Python dependencies there, what fails is loading
        # its GPU libraries.
        if run("import typing_extensions", torch_path)[0] == 0:
            self.assertIn("cannot open shared object file", out)

    def test_backend_resolves_torch_in_the_process(self):
        """The backend's library names no torch library (auditwheel); with
        the torch libraries a CPU process can load made global, as
        mori._torch_backend does after `import torch`, every symbol it needs
        resolves (loaded with RTLD_NOW) and its operators register."""
        torch_path = os.environ.get("MORI_WHEEL_TEST_TORCH_DIR")
        if not torch_path:
            self.skipTest("no torch installation given (--torch-dir)")
        torch_lib = os.path.join(torch_path.split(os.pathsep)[0], "torch", "lib")
        gpu = gpu_platform()
        code, out = run(f"""
            import ctypes, os, subprocess
            import mori
            backend = os.path.join(os.path.dirname(mori.__file__), "lib", "{gpu}", "libmori_torch.so")
            needed = subprocess.run(["readelf", "-d", backend], capture_output=True, text=True).stdout
            assert "libtorch" not in needed and "libc10" not in needed, needed
            try:
                ctypes.CDLL(backend)
                raise AssertionError("the backend loaded without torch's libraries")
            except OSError as e:
                print("WITHOUT TORCH", e)
            for name in ("libc10.so", "libtorch_cpu.so"):
                ctypes.CDLL(os.path.join({torch_lib!r}, name), mode=ctypes.RTLD_GLOBAL)
            lib = ctypes.CDLL(backend)
            lib.mori_torch_build_info.restype = ctypes.c_char_p
            print("BUILD INFO", lib.mori_torch_build_info().decode())
        """)
        self.assertEqual(code, 0, out)
        self.assertIn("undefined symbol", out)
        self.assertRegex(out, r"BUILD INFO mori=\d+\.\d+\.\d+ platform=(cuda|hip) torch=\d+\.\d+")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--torch-dir")
    a, rest = ap.parse_known_args()
    if a.torch_dir:
        os.environ["MORI_WHEEL_TEST_TORCH_DIR"] = os.path.abspath(a.torch_dir)
    unittest.main(argv=[sys.argv[0]] + rest)
