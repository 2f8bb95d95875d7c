# SPDX-License-Identifier: MIT
"""mori.ops' MoE dispatch/combine (the MORI-EP interface) in Python on the
host platform: the interface's names, arguments and defaults, then
separate processes at 2, 4 and 8 PEs (ep_pe.py) checking every call
against a reference made of torch operations (ep_reference.py).

MORI_EP_TEST_CALLS=N sets the back-to-back calls of each PE count (default
below); EP_TEST_WORLDS="2 4 8" the PE counts."""
import dataclasses
import inspect
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))  # the runfiles' workspace root
sys.path.insert(0, os.path.join(ROOT, "python"))  # the package mori (//python:package)
os.environ.setdefault("MORI_LIB", os.path.join(ROOT, "libmori.so"))

# Back-to-back calls per PE count: about a minute at 8 PEs on two cores
# (each call checked against the reference on every PE); a quarter of that
# under AddressSanitizer.
DEFAULT_CALLS = {2: 5000, 4: 2000, 8: 1000}
ASAN_SHARE = 4


class InterfaceTest(unittest.TestCase):
    """The names, arguments, defaults and values of the MORI-EP guide."""

    def test_import_without_torch_backend(self):
        import mori.ops

        for name in ("EpDispatchCombineConfig", "EpDispatchCombineKernelType", "EpDispatchCombineOp"):
            self.assertIn(name, dir(mori.ops))
            self.assertIs(getattr(mori.ops, name), getattr(mori.ops.ep, name))
        with self.assertRaisesRegex(ImportError, "needs mori's torch backend"):
            mori.ops.all_to_all  # noqa: B018  (host platform: no backend, a clear reason)

    def test_kernel_types(self):
        from mori.ops import EpDispatchCombineKernelType as K

        self.assertEqual({k.name: int(k) for k in K},
                         {"IntraNode": 0, "InterNode": 1, "InterNodeV1": 2, "InterNodeV1LL": 3, "AsyncLL": 4})

    def test_config_fields_and_defaults(self):
        import torch
        from mori.ops import EpDispatchCombineConfig, EpDispatchCombineKernelType

        fields = dataclasses.fields(EpDispatchCombineConfig)
        self.assertEqual([f.name for f in fields], [
            "data_type", "rank", "world_size", "hidden_dim", "scale_dim", "scale_type_size", "max_token_type_size",
            "max_num_inp_token_per_rank", "num_experts_per_rank", "num_experts_per_token", "warp_num_per_block",
            "block_num", "use_external_inp_buf", "kernel_type", "gpu_per_node", "rdma_block_num", "num_qp_per_pe"])
        defaults = {f.name: f.default for f in fields if f.default is not dataclasses.MISSING}
        self.assertEqual(defaults, {"warp_num_per_block": 8, "block_num": 80, "use_external_inp_buf": True,
                                    "kernel_type": EpDispatchCombineKernelType.IntraNode, "gpu_per_node": 8,
                                    "rdma_block_num": 0, "num_qp_per_pe": 1})
        c = EpDispatchCombineConfig(torch.bfloat16, 0, 8, 7168, 0, 1, 4, 4096, 32, 8)
        self.assertEqual((c.data_type, c.hidden_dim, c.num_experts_per_token), (torch.bfloat16, 7168, 8))

    def test_op_signatures(self):
        from mori.ops import EpDispatchCombineOp

        def params(name):
            sig = inspect.signature(getattr(EpDispatchCombineOp, name))
            return [(p.name, p.default) for p in list(sig.parameters.values())[1:]]

        E = inspect.Parameter.empty
        self.assertEqual(params("__init__"), [("config", E)])
        launch = [("block_num", -1), ("rdma_block_num", -1), ("warp_per_block", -1)]
        self.assertEqual(params("dispatch"), [("input", E), ("weights", E), ("scales", E), ("indices", E)] + launch)
        self.assertEqual(params("dispatch_send"), params("dispatch"))
        self.assertEqual(params("combine"), [("input", E), ("weights", E), ("indices", E)] + launch
                         + [("use_external_inp_buf", -1), ("call_reset", False)])
        self.assertEqual(params("combine_send"), params("combine")[:-1])
        self.assertEqual(params("dispatch_recv"), launch)
        self.assertEqual(params("combine_recv"), launch)
        self.assertEqual(params("reset"), [])
        self.assertEqual(params("check"), [])
        self.assertEqual(params("get_dispatch_src_token_pos"), [])
        self.assertEqual(params("decode_send_flat_idx"), [("pos", E)])
        self.assertEqual(params("get_registered_combine_input_buffer")[0], ("dtype", E))
        convert_launch = [("block_num", -1), ("warp_per_block", -1)]
        self.assertEqual(params("convert_dispatch_output"), [("dispatch_out_x", E), ("dispatch_out_topk_idx", E)]
                         + convert_launch)
        self.assertEqual(params("convert_combine_input"), [("packed_recv_x", E), ("packed_recv_src_info", E),
                                                           ("packed_recv_layout_range", E)] + convert_launch)
        self.assertEqual(params("dispatch_standard_moe"), params("dispatch"))
        self.assertEqual(params("combine_standard_moe")[:7], params("combine")[:6] + [("call_reset", False)])

    def test_custom_ops_registered(self):
        import torch
        import mori.ops.ep  # noqa: F401

        for name in ("ep_dispatch", "ep_dispatch_recv", "ep_combine", "ep_combine_recv", "ep_reset", "ep_refused"):
            self.assertTrue(hasattr(torch.ops.mori, name), name)

    def test_flat_token_positions_widen_to_int64_only_past_int32(self):
        # The PE tests' configurations stay far below 2^31; the widening is
        # checked here on the conversion alone, either side of its edge.
        import torch
        from mori.ops.ep import _flat_token_positions

        def case(world, m):
            last_rank_last_token = (world - 1) * m + (m - 1)  # the library's form of the largest position
            raw = torch.tensor([0, m - 1, m, last_rank_last_token], dtype=torch.int32)
            return _flat_token_positions(raw, world, m)

        edge = case(2, 1 << 29)  # world^2 * m == 2^31: every value the format can hold fits in int32
        self.assertEqual(edge.dtype, torch.int32)
        self.assertEqual(edge.tolist(), [0, (1 << 29) - 1, 1 << 30, (1 << 30) + (1 << 29) - 1])
        past = case(4, 1 << 28)  # world^2 * m == 2^32
        self.assertEqual(past.dtype, torch.int64)
        stride = 4 << 28
        self.assertEqual(past.tolist(), [0, (1 << 28) - 1, stride, 3 * stride + (1 << 28) - 1])
        small = case(3, 5)
        self.assertEqual((small.dtype, small.tolist()), (torch.int32, [0, 4, 15, 2 * 15 + 4]))


def torchrun_2(code, timeout):
    """(exit code, output) of the script `code` under torchrun at 2 ranks
    on this host, finding the package here."""
    with tempfile.TemporaryDirectory(dir=os.environ.get("TEST_TMPDIR")) as tmp:
        script = os.path.join(tmp, "script.py")
        with open(script, "w") as f:
            f.write(code)
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.join(ROOT, "python"),
                                                           os.environ.get("PYTHONPATH", "")]))
        p = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
                            script], env=env, cwd=tmp, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           timeout=timeout)
        return p.returncode, p.stdout


def doc_example(path):
    """The code block after the `<!-- ep-example -->` line of docs/ep.md."""
    with open(path) as f:
        lines = f.read().splitlines()
    start = lines.index("<!-- ep-example -->") + 2  # past the marker and the fence
    end = lines.index("```", start)
    return "\n".join(lines[start:end]) + "\n"


class DocExampleTest(unittest.TestCase):
    def test_docs_ep_example_at_2_ranks(self):
        """docs/ep.md's complete example, as written, under torchrun."""
        import mori.ops.ep as ep

        if ep.C.MISSING:
            self.skipTest(f"libmori.so lacks {', '.join(ep.C.MISSING)}")
        code, out = torchrun_2(doc_example(os.path.join(ROOT, "docs", "ep.md")), 300)
        self.assertEqual(code, 0, out)
        for r in range(2):
            self.assertRegex(out, rf"rank {r}: received \d+ tokens, combine matches")


class ProcessGroupInitTest(unittest.TestCase):
    def test_a_unique_id_rank_0_cannot_make_fails_every_rank_in_step(self):
        """mori.shmem.shmem_torch_process_group_init where group rank 0
        cannot make the unique ID (its MORI_SOCKET_IFNAME matches nothing):
        rank 0 raises the library's error, the others an error naming rank
        0's, at once; the group's next collective pairs as it should (the
        others' broadcast used to take rank 0's next one as the ID)."""
        code = (
            "import os, torch.distributed as dist\n"
            "from mori import shmem\n"
            "dist.init_process_group('gloo')\n"
            "rank = dist.get_rank()\n"
            "if rank == 0: os.environ['MORI_SOCKET_IFNAME'] = 'nosuchif0'\n"
            "try:\n"
            "    shmem.shmem_torch_process_group_init(dist.group.WORLD.group_name)\n"
            "    raise SystemExit('the init succeeded')\n"
            "except (shmem.ShmemError, RuntimeError) as e:\n"
            "    print(f'rank {rank}: {type(e).__name__}: {e}', flush=True)\n"
            "box = [f'payload of rank {rank}']\n"
            "dist.broadcast_object_list(box, src=0)\n"
            "print(f'rank {rank}: next broadcast: {box[0]}', flush=True)\n"
            "dist.barrier()\n"
            "dist.destroy_process_group()\n")
        rc, out = torchrun_2(code, 120)
        self.assertEqual(rc, 0, out)
        self.assertRegex(out, r"rank 0: ShmemError: .*nosuchif0")
        self.assertRegex(out, r"rank 1: RuntimeError: .*group rank 0 could not make the unique ID.*nosuchif0")
        for r in range(2):
            self.assertIn(f"rank {r}: next broadcast: payload of rank 0", out)


class ExitTest(unittest.TestCase):
    def test_an_op_alive_at_exit_prints_no_traceback(self):
        """An op never destroyed, alive when the interpreter exits: its
        __del__ ran with the import machinery gone and printed a traceback
        ("Exception ignored in ... __del__ ... ImportError") on every rank."""
        import mori.ops.ep as ep

        if ep.C.MISSING:
            self.skipTest(f"libmori.so lacks {', '.join(ep.C.MISSING)}")
        code = (
            "import torch, mori.ops\n"
            "from mori import shmem\n"
            "uid = shmem.shmem_get_unique_id()\n"
            "shmem.shmem_init_attr(shmem.MORI_SHMEM_INIT_WITH_UNIQUEID, 0, 1, uid)\n"
            "op = mori.ops.EpDispatchCombineOp(mori.ops.EpDispatchCombineConfig(data_type=torch.bfloat16, rank=0,\n"
            "    world_size=1, hidden_dim=16, max_num_inp_token_per_rank=4, num_experts_per_rank=2,\n"
            "    num_experts_per_token=2, gpu_per_node=1, scale_dim=0, scale_type_size=0, max_token_type_size=2))\n"
            "print('made', flush=True)\n")
        env = dict(os.environ, MORI_SHMEM_VMM_CHUNK_SIZE="4M", MORI_SHMEM_HEAP_SIZE="64M", MORI_RANK="0",
                   PYTHONPATH=os.pathsep.join([os.path.join(ROOT, "python"), os.environ.get("PYTHONPATH", "")]))
        p = subprocess.run([sys.executable, "-W", "always", "-c", code], env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, timeout=120)
        self.assertEqual(p.returncode, 0, p.stdout)
        self.assertIn("made", p.stdout)
        self.assertNotIn("Exception ignored", p.stdout)
        self.assertNotIn("Traceback", p.stdout)


class MultiPeTest(unittest.TestCase):
    def test_dispatch_combine_at_2_4_and_8_pes(self):
        import mori.ops.ep as ep

        if ep.C.MISSING:  # the library predates mori/ep.h's implementation
            self.skipTest(f"libmori.so lacks {', '.join(ep.C.MISSING)}")
        env = dict(os.environ, MORI_SHMEM_VMM_CHUNK_SIZE="4M", MORI_SHMEM_HEAP_SIZE="256M",
                   MORI_BOOTSTRAP_TIMEOUT_MS="60000", PYTHONPATH=os.pathsep.join(
                       [os.path.join(ROOT, "python"), os.path.join(ROOT, "tests", "shmem"),
                        os.environ.get("PYTHONPATH", "")]))
        worlds = [int(w) for w in os.environ.get("EP_TEST_WORLDS", "2 4 8").split()]
        for n in worlds:
            calls = DEFAULT_CALLS.get(n, 100)
            if "libasan" in os.environ.get("LD_PRELOAD", ""):
                calls //= ASAN_SHARE
            calls = int(os.environ.get("MORI_EP_TEST_CALLS", calls))
            with self.subTest(pes=n), tempfile.TemporaryDirectory(dir=os.environ.get("TEST_TMPDIR")) as tmp:
                uid_path = os.path.join(tmp, "uid")
                procs = [subprocess.Popen([sys.executable, os.path.join(HERE, "ep_pe.py"), str(r), str(n), uid_path,
                                           str(calls)], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                          text=True) for r in range(n)]
                try:
                    outs = [p.communicate(timeout=900)[0] for p in procs]
                finally:
                    for p in procs:
                        if p.poll() is None:
                            p.kill()
                bad = [f"PE {r} of {n} (exit {p.returncode}):\n{out}" for r, (p, out) in enumerate(zip(procs, outs))
                       if p.returncode != 0 or f"PE {r} of {n}: ok" not in out]
                self.assertFalse(bad, "\n".join(bad))
                for out in outs:
                    print(out.strip().splitlines()[-1], flush=True)


if __name__ == "__main__":
    unittest.main()
