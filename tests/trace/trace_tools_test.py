# SPDX-License-Identifier: MIT
"""tools/trace_merge.py and tools/trace_render.py on synthetic traces: the
sync marker and the wall clock put mori's events where they belong on
torch's timeline, traces with different bases are rebased, mori's events
get threads of their own in the rank's process, bad input fails, and the
render draws a PNG or says matplotlib is missing."""
import json
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(sys.argv[1])))
import trace_merge  # noqa: E402
import trace_render  # noqa: E402

BASE_NS = 1_700_000_000_000_000_000  # torch's baseTimeNanoseconds (Unix time)


def mori_doc(rank, os_pid, events, realtime_minus_monotonic_us=0):
    return {"otherData": {"clock": "CLOCK_MONOTONIC", "rank": rank, "os_pid": os_pid,
                          "realtime_minus_monotonic_us": realtime_minus_monotonic_us, "dropped_events": 0},
            "traceEvents": [{"name": "process_name", "ph": "M", "pid": rank, "tid": 0,
                             "args": {"name": f"mori rank {rank}"}}] +
            [{"name": n, "cat": "mori", "ph": "X", "ts": ts, "dur": dur, "pid": rank, "tid": os_pid, "args": {}}
             for n, ts, dur in events]}


def torch_doc(base_ns, pid, events):
    return {"schemaVersion": 1, "baseTimeNanoseconds": base_ns,
            "traceEvents": [{"name": n, "cat": "cpu_op", "ph": "X", "ts": ts, "dur": dur, "pid": pid, "tid": pid}
                            for n, ts, dur in events]}


def mori_events(merged):
    return {e["name"]: e for e in merged["traceEvents"] if e.get("cat") == "mori"}


class Merge(unittest.TestCase):
    def test_sync_marker_aligns_exactly(self):
        torch = torch_doc(BASE_NS, 4242, [("mori_clock_sync monotonic_ns=900000", 50.0, 1.0), ("aten::add", 140.0, 30.0)])
        mori = mori_doc(0, 4242, [("window_barrier", 1000.0, 10.0)], realtime_minus_monotonic_us=123456789)
        merged, notes = trace_merge.merge([torch], [("m0.json", mori)])
        e = mori_events(merged)["window_barrier"]
        self.assertAlmostEqual(e["ts"], 150.0)  # 50 + (1000 - 900)
        self.assertEqual(e["dur"], 10.0)
        self.assertEqual(e["pid"], 4242, "in the rank's torch process")
        self.assertEqual(e["tid"], trace_merge.MORI_TID_BASE + 4242, "on a thread of its own")
        names = [x for x in merged["traceEvents"] if x.get("ph") == "M" and x.get("tid") == e["tid"]]
        self.assertEqual(len(names), 1)
        self.assertIn("mori rank 0", names[0]["args"]["name"])
        self.assertIn("sync marker", notes[0])
        self.assertEqual(merged["baseTimeNanoseconds"], BASE_NS)

    def test_wall_clock_without_a_marker(self):
        torch = torch_doc(BASE_NS, 4242, [("aten::add", 10.0, 5.0)])
        # mori's CLOCK_MONOTONIC 2000 us is Unix time BASE + 777 us.
        offset = BASE_NS / 1000 + 777 - 2000
        mori = mori_doc(1, 4242, [("all_reduce", 2000.0, 4.0)], realtime_minus_monotonic_us=offset)
        merged, notes = trace_merge.merge([torch], [("m1.json", mori)])
        self.assertAlmostEqual(mori_events(merged)["all_reduce"]["ts"], 777.0, places=3)
        self.assertIn("wall clock", notes[0])

    def test_traces_with_different_bases_are_rebased(self):
        t0 = torch_doc(BASE_NS, 10, [("mori_clock_sync monotonic_ns=1000000", 100.0, 1.0)])
        t1 = torch_doc(BASE_NS + 5_000_000, 11, [("mori_clock_sync monotonic_ns=1000000", 100.0, 1.0)])
        m0 = mori_doc(0, 10, [("agree", 1100.0, 1.0)])
        m1 = mori_doc(1, 11, [("comm_allgather", 1100.0, 1.0)])
        merged, _ = trace_merge.merge([t0, t1], [("m0", m0), ("m1", m1)])
        ev = mori_events(merged)
        self.assertAlmostEqual(ev["agree"]["ts"], 200.0)
        self.assertAlmostEqual(ev["comm_allgather"]["ts"], 5200.0, msg="rank 1's trace began 5 ms later")
        torch_ts = sorted(e["ts"] for e in merged["traceEvents"] if e.get("cat") == "cpu_op")
        self.assertEqual(torch_ts, [100.0, 5100.0])

    def test_mori_files_alone_are_combined(self):
        m0 = mori_doc(0, 10, [("window_create", 5.0, 2.0)])
        m1 = mori_doc(1, 11, [("window_destroy", 9.0, 1.0)])
        merged, _ = trace_merge.merge([], [("m0", m0), ("m1", m1)])
        ev = mori_events(merged)
        self.assertEqual((ev["window_create"]["pid"], ev["window_create"]["ts"]), (0, 5.0))
        self.assertEqual((ev["window_destroy"]["pid"], ev["window_destroy"]["ts"]), (1, 9.0))
        self.assertEqual(sum(1 for e in merged["traceEvents"] if e.get("name") == "process_name"), 2)

    def test_cli_writes_json_and_refuses_bad_input(self):
        with tempfile.TemporaryDirectory() as d:
            m = os.path.join(d, "m.json")
            t = os.path.join(d, "t.json")
            out = os.path.join(d, "merged.json")
            json.dump(mori_doc(0, 7, [("mem_alloc", 3.0, 1.0)]), open(m, "w"))
            json.dump(torch_doc(BASE_NS, 7, [("mori_clock_sync monotonic_ns=0", 1.0, 0.0)]), open(t, "w"))
            self.assertEqual(trace_merge.main(["-o", out, "--torch", t, m]), 0)
            merged = json.load(open(out))
            self.assertAlmostEqual(mori_events(merged)["mem_alloc"]["ts"], 4.0)
            bad = os.path.join(d, "bad.json")
            open(bad, "w").write('{"traceEvents": 3}')
            self.assertEqual(trace_merge.main(["-o", out, bad]), 1)
            open(bad, "w").write("{not json")
            self.assertEqual(trace_merge.main(["-o", out, bad]), 1)

    def test_render_draws_or_says_matplotlib_is_missing(self):
        with tempfile.TemporaryDirectory() as d:
            src = os.path.join(d, "m.json")
            json.dump(mori_doc(0, 7, [("window_create", 3.0, 10.0), ("agree", 4.0, 2.0)]), open(src, "w"))
            png = os.path.join(d, "t.png")
            rc = trace_render.main([src, png])
            try:
                import matplotlib  # noqa: F401
                have = True
            except ImportError:
                have = False
            if have:
                self.assertEqual(rc, 0)
                self.assertEqual(open(png, "rb").read(8), b"\x89PNG\r\n\x1a\n")
            else:
                self.assertEqual(rc, 3)
                self.assertFalse(os.path.exists(png))


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0]])
