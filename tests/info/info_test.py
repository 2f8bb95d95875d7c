# SPDX-License-Identifier: MIT
"""mori_info and python -m mori.info on the host platform: the text and the
JSON report carry what they promise; an unknown MORI_* name is warned; under
mori_launch at 2, 4 and 8 ranks --comm gives one row per (rank, peer) with
p2p and the LSA team; on two simulated nodes (MORI_HOST_ID per rank) the
peers outside the LSA team are reached by nothing and the row says why.
  info_test.py <mori_info> <mori_launch> <libmori.so>"""
import json
import os
import subprocess
import sys
import unittest

MORI_INFO, MORI_LAUNCH, LIBMORI = (os.path.abspath(p) for p in sys.argv[1:4])
del sys.argv[1:4]
ROOT = os.path.dirname(LIBMORI)
PYTHON_ROOT = os.path.join(ROOT, "python")


def clean_env(**extra):
    """The caller's environment without any MORI_* variable, plus `extra`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MORI_")}
    env.update(extra)
    return env


def run(argv, env=None, check=True):
    p = subprocess.run(argv, env=env or clean_env(), capture_output=True, text=True, timeout=120)
    if check and p.returncode != 0:
        raise AssertionError(f"{argv} exited {p.returncode}\nstdout:\n{p.stdout}\nstderr:\n{p.stderr}")
    return p


def launch(ranks, *argv, env=None):
    return run([MORI_LAUNCH, "-n", str(ranks), "--no-prefix", *argv], env=env)


class LocalReport(unittest.TestCase):
    def test_text_has_every_section(self):
        out = run([MORI_INFO]).stdout
        lines = out.splitlines()
        self.assertRegex(lines[0], r"^mori \d+\.\d+\.\d+, platform host$")
        for prefix in ("device 0: ", "handle types on device 0: fabric ", "transport p2p: available",
                       "transport sdma: available", "transport rdma: ", "gpu posting: unavailable: ",
                       "heap: vmm, grows to 512 GiB in chunks of 1 GiB", "environment: no MORI_* variable set",
                       "comm: 1 rank, windows exchange "):
            self.assertTrue(any(line.startswith(prefix) for line in lines), f"no line starts with {prefix!r}:\n{out}")
        self.assertIn("GPU-initiated posting is not built in this version", out)

    def test_json_has_every_field(self):
        doc = json.loads(run([MORI_INFO, "--json"]).stdout)
        self.assertEqual(doc["platform"], "host")
        self.assertRegex(doc["version"], r"^\d+\.\d+\.\d+$")
        self.assertEqual(doc["device_count"], 1)
        self.assertTrue(doc["devices"][0]["arch"])
        self.assertEqual(set(doc["handle_types"]["probed"]), {"fabric", "posix_fd", "legacy_ipc"})
        self.assertIn(doc["handle_types"]["preferred"], ("fabric", "posix_fd"))
        transports = {t["name"]: t for t in doc["transports"]}
        self.assertEqual(set(transports), {"p2p", "sdma", "rdma"})
        self.assertTrue(transports["p2p"]["available"])
        # CI machines have no RDMA device: the report says why.
        if not transports["rdma"]["available"]:
            self.assertIn("no usable device", transports["rdma"]["detail"])
        self.assertFalse(doc["gpu_initiated_posting"]["available"])
        self.assertEqual(doc["heap"]["mode"], "vmm")
        self.assertEqual(doc["heap"]["size"], 512 << 30)
        self.assertEqual(doc["environment"], [])
        self.assertEqual(doc["warnings"], [])
        self.assertTrue(doc["comm"]["made"])
        self.assertEqual(doc["peers"], [])

    def test_variables_are_read_as_mori_reads_them(self):
        env = clean_env(MORI_SHMEM_MODE="static", MORI_SHMEM_HEAP_SIZE="6G", MORI_LOG_LEVEL="error")
        doc = json.loads(run([MORI_INFO, "--json"], env=env).stdout)
        self.assertEqual(doc["heap"]["mode"], "static")
        self.assertEqual(doc["heap"]["size_text"], "6 GiB")
        parsed = {e["name"]: e["parsed"] for e in doc["environment"]}
        self.assertEqual(parsed["MORI_SHMEM_HEAP_SIZE"], "6 GiB")  # env-check: ignore (a typo on purpose)
        self.assertIn("heap: static, 6 GiB", run([MORI_INFO], env=env).stdout)

    def test_an_unknown_variable_is_warned_with_the_likely_name(self):
        env = clean_env(MORI_SHMEM_HEAP_SIZ="1G", MORI_LOG_LEVEL="error")  # env-check: ignore (a typo on purpose)
        out = run([MORI_INFO], env=env).stdout
        self.assertIn("warning: MORI_SHMEM_HEAP_SIZ=1G: not a variable mori knows (did you mean MORI_SHMEM_HEAP_SIZE?)", out)  # env-check: ignore (a typo on purpose)
        doc = json.loads(run([MORI_INFO, "--json"], env=env).stdout)
        self.assertEqual(len(doc["warnings"]), 1)
        self.assertIn("MORI_SHMEM_HEAP_SIZ", doc["warnings"][0])  # env-check: ignore (a typo on purpose)
        unknown = [e for e in doc["environment"] if not e["known"]]
        self.assertEqual([e["name"] for e in unknown], ["MORI_SHMEM_HEAP_SIZ"])  # env-check: ignore (a typo on purpose)

    def test_a_misspelt_secret_is_not_shown(self):
        env = clean_env(MORI_BOOSTRAP_SECRET="topsecret123", MORI_Bootstrap_Secret="othersecret",  # env-check: ignore (typos on purpose)
                        MORI_LOG_LEVEL="error")
        for argv in ([MORI_INFO], [MORI_INFO, "--json"]):
            out = run(argv, env=env).stdout
            self.assertNotIn("topsecret123", out)
            self.assertNotIn("othersecret", out)
            self.assertIn("MORI_BOOSTRAP_SECRET", out)  # env-check: ignore (a typo on purpose)

    def test_bytes_that_are_not_utf8_keep_the_json_valid(self):
        env = clean_env(MORI_HOST_ID="a\udcffb", MORI_LOG_LEVEL="error")  # the byte 0xff
        doc = json.loads(run([MORI_INFO, "--json"], env=env).stdout)
        host = [e for e in doc["environment"] if e["name"] == "MORI_HOST_ID"]
        self.assertEqual(host[0]["value"], "a\ufffdb", host)
        # Ill-formed sequences of well-formed shape (RFC 3629): an overlong
        # form, a surrogate, past U+10FFFF; each byte replaced. Text=True
        # decodes the output strictly: invalid UTF-8 fails the test there.
        for raw in ("\udce0\udc80\udc80", "\udced\udca0\udc80", "\udcf4\udc90\udc80\udc80"):
            env["MORI_HOST_ID"] = "a" + raw + "b"
            doc = json.loads(run([MORI_INFO, "--json"], env=env).stdout)
            host = [e for e in doc["environment"] if e["name"] == "MORI_HOST_ID"]
            self.assertEqual(host[0]["value"], "a" + "\ufffd" * (len(raw)) + "b", (raw, host))
        env["MORI_HOST_ID"] = "caf\u00e9 \u2603 \U0001f600"  # well-formed: kept as it is
        doc = json.loads(run([MORI_INFO, "--json"], env=env).stdout)
        host = [e for e in doc["environment"] if e["name"] == "MORI_HOST_ID"]
        self.assertEqual(host[0]["value"], "caf\u00e9 \u2603 \U0001f600", host)
        env.update(MORI_LIB=LIBMORI, PYTHONPATH=PYTHON_ROOT)
        code = "import mori.info as i; i.report(); print(i.report(json=True)['platform'])"
        self.assertEqual(run([sys.executable, "-c", code], env=env).stdout.strip(), "host")

    def test_a_library_that_cannot_load_is_one_line_not_a_traceback(self):
        env = clean_env(MORI_LIB="/nonexistent dir/libmori.so", PYTHONPATH=PYTHON_ROOT)
        p = run([sys.executable, "-m", "mori.info"], env=env, check=False)
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertNotIn("Traceback", p.stderr)
        self.assertIn("nonexistent dir", p.stderr)

    def test_a_malformed_value_is_an_error_line_and_the_comm_says_why(self):
        env = clean_env(MORI_SHMEM_HEAP_SIZE="lots", MORI_LOG_LEVEL="error")
        out = run([MORI_INFO], env=env).stdout
        self.assertRegex(out, r"(?m)^error: MORI_SHMEM_HEAP_SIZE=lots: .*MORI_SHMEM_HEAP_SIZE")
        self.assertRegex(out, r"(?m)^heap: error: ")

    def test_bad_arguments_are_refused(self):
        p = run([MORI_INFO, "--bogus"], check=False)
        self.assertEqual(p.returncode, 2)
        self.assertIn("unknown argument '--bogus'", p.stderr)

    def test_python_module_prints_the_same_report(self):
        env = clean_env(MORI_LIB=LIBMORI, PYTHONPATH=PYTHON_ROOT, MORI_LOG_LEVEL="error")
        doc = json.loads(run([sys.executable, "-m", "mori.info", "--json"], env=env).stdout)
        self.assertEqual(doc["platform"], "host")
        self.assertEqual({t["name"] for t in doc["transports"]}, {"p2p", "sdma", "rdma"})
        text = run([sys.executable, "-m", "mori.info"], env=env).stdout
        self.assertTrue(text.startswith("mori "), text)


class PeerTable(unittest.TestCase):
    def rows(self, ranks, *argv, env=None):
        out = launch(ranks, *argv, env=env).stdout
        doc = json.loads(out)  # rank 0 alone prints: one document
        self.assertEqual(doc["comm"]["size"], ranks)
        return doc["peers"]

    def check_one_node(self, ranks, rows):
        self.assertEqual(sorted((r["rank"], r["peer"]) for r in rows), [(a, b) for a in range(ranks) for b in range(ranks)])
        for r in rows:
            self.assertEqual(r["transport"], "p2p", r)
            self.assertEqual(r["lsa_team"], {"base": 0, "size": ranks}, r)
            self.assertTrue(r["in_lsa_team"], r)
            self.assertIn("load_store", r["caps"], r)
            self.assertEqual(r["why"], "this rank" if r["rank"] == r["peer"] else
                             "in the LSA team: same host, its memory is mapped (load/store)")

    def test_one_node_at_2_4_8_ranks(self):
        for ranks in (2, 4, 8):
            with self.subTest(ranks=ranks):
                self.check_one_node(ranks, self.rows(ranks, MORI_INFO, "--comm", "--json", env=clean_env(MORI_LOG_LEVEL="error")))

    def test_text_table_has_a_line_per_rank_and_peer(self):
        out = launch(4, MORI_INFO, "--comm", env=clean_env(MORI_LOG_LEVEL="error")).stdout
        lines = [line for line in out.splitlines() if line.startswith("peer ")]
        self.assertEqual(len(lines), 16, out)
        self.assertIn("peer 1 -> 2 | [0, 4) | p2p | sdma | ", out)
        self.assertIn("comm: 4 ranks", out)

    def test_python_module_under_the_launcher(self):
        env = clean_env(MORI_LIB=LIBMORI, PYTHONPATH=PYTHON_ROOT, MORI_LOG_LEVEL="error")
        self.check_one_node(2, self.rows(2, sys.executable, "-m", "mori.info", "--comm", "--json", env=env))

    def test_two_simulated_nodes(self):
        # Ranks 0-1 declare host node0, ranks 2-3 node1 (MORI_HOST_ID): p2p
        # stays within a node; rdma has no device here, so the other node's
        # ranks are reached by nothing, and the row says both reasons.
        script = 'MORI_HOST_ID=node$((MORI_RANK / 2)) exec "$0" --comm --json'
        rows = self.rows(4, "/bin/sh", "-c", script, MORI_INFO, env=clean_env(MORI_LOG_LEVEL="error"))
        self.assertEqual(len(rows), 16)
        for r in rows:
            same_node = r["rank"] // 2 == r["peer"] // 2
            self.assertEqual(r["lsa_team"], {"base": r["rank"] // 2 * 2, "size": 2}, r)
            self.assertEqual(r["in_lsa_team"], same_node, r)
            self.assertEqual(r["host"], f"node{r['peer'] // 2}", r)
            if same_node:
                self.assertEqual(r["transport"], "p2p", r)
                continue
            self.assertIn(f"on another host (node{r['peer'] // 2})", r["why"], r)
            if r["transport"] is None:
                self.assertIn("not reachable by rdma: no usable device", r["why"], r)
                self.assertEqual(r["caps"], "", r)
            else:  # a machine with an RDMA NIC
                self.assertEqual(r["transport"], "rdma", r)

    def test_a_rank_that_cannot_join_fails_with_the_reason(self):
        # --comm without a launcher's environment: no comm, a clear error.
        p = run([MORI_INFO, "--comm"], env=clean_env(MORI_RANK="0", MORI_WORLD_SIZE="2", MORI_BOOTSTRAP_TIMEOUT_MS="1500",
                                                     MORI_BOOTSTRAP_ADDR="127.0.0.1:1", MORI_LOG_LEVEL="error"), check=False)
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        self.assertRegex(p.stdout, r"(?m)^comm: error: ")
        self.assertIn("mori_info: MORI_E", p.stderr)


if __name__ == "__main__":
    unittest.main()
