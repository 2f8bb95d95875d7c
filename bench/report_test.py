# SPDX-License-Identifier: MIT
"""bench/report.py's fused-collectives table: every record is filed under its
own operation (all-to-all-into-a-window records once went under all-reduce,
so all-reduce 16 MiB `auto` showed 51.51 µs where its records say 59.33), a
failed run is never the fastest, an unknown operation is an error, and
docs/performance.md holds what report.py makes of the records in the repo.

    python3 bench/report_test.py [ROOT]    (ROOT: the repository, default ..)
"""
import json
import os
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import report  # noqa: E402
import summary  # noqa: E402

ROOT = os.path.dirname(HERE)
COLL = "docs/perf/h200x2_coll.jsonl"
DOC = "docs/performance.md"


def rec(what, nbytes, algo, us, **extra):
    return dict({"what": what, "ranks": 2, "bytes": nbytes, "algo": algo, "us": us}, **extra)


def table_rows(section):
    """{(op, size, algorithm): [cells]} of a coll_section table."""
    rows = {}
    for line in section.split("\n"):
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("| ") and len(cells) >= 4 and cells[0] != "op":
            rows[(cells[0], cells[1], cells[2])] = cells[3:]
    return rows


class CollSection(unittest.TestCase):
    def test_each_operation_has_its_own_rows(self):
        recs = [rec("coll_all_reduce", 1 << 24, "auto", 59.33), rec("coll_all_reduce", 1 << 24, "rsag", 59.46),
                rec("coll_a2a", 1 << 24, "auto", 70.0), rec("coll_a2a_window", 1 << 24, "auto", 51.51)]
        rows = table_rows(report.coll_section(recs, COLL, "docs"))
        self.assertEqual(rows[("all-reduce", "16 MiB", "auto")], ["59.33"])
        self.assertEqual(rows[("all-reduce", "16 MiB", "rsag")], ["59.46"])
        self.assertEqual(rows[("all-to-all", "16 MiB", "auto")], ["70.00"])
        self.assertEqual(rows[("all-to-all into a window", "16 MiB", "auto")], ["51.51"])
        self.assertEqual(len(rows), 4, rows)

    def test_a_failed_run_is_not_the_fastest(self):
        recs = [rec("coll_a2a", 65536, "ll", -1), rec("coll_a2a", 65536, "ll", 5.5),
                rec("coll_a2a", 65536, "slices", -1)]
        rows = table_rows(report.coll_section(recs, COLL, "docs"))
        self.assertEqual(rows[("all-to-all", "64 KiB", "ll")], ["5.50"])
        self.assertEqual(rows[("all-to-all", "64 KiB", "slices")], ["failed"])

    def test_an_unknown_operation_is_an_error(self):
        with self.assertRaisesRegex(ValueError, "coll_reduce_scatter"):
            report.coll_section([rec("coll_reduce_scatter", 65536, "auto", 3.0)], COLL, "docs")

    def test_variants_keep_their_columns(self):
        recs = [rec("coll_a2a", 65536, "auto", 4.0), rec("coll_a2a", 65536, "auto", 3.0, bin="share")]
        section = report.coll_section(recs, COLL, "docs")
        self.assertIn("| op | bytes | algorithm | defaults | MORI_COLL_BLOCK_SHARE=1 |", section)
        self.assertEqual(table_rows(section)[("all-to-all", "64 KiB", "auto")], ["4.00", "3.00"])


class RecordsInTheRepo(unittest.TestCase):
    """The table made from the records in the repository, checked against the
    records read independently, and against docs/performance.md."""

    @classmethod
    def setUpClass(cls):
        cls.recs = summary.load(os.path.join(ROOT, COLL))
        cls.section = report.coll_section(cls.recs, os.path.join(ROOT, COLL), os.path.join(ROOT, "docs"))
        cls.rows = table_rows(cls.section)

    def test_every_row_is_the_fastest_record_of_its_operation(self):
        names = {"coll_a2a": "all-to-all", "coll_a2a_window": "all-to-all into a window",
                 "coll_all_reduce": "all-reduce"}
        best = {}
        for r in self.recs:
            if r["what"] == "floor" or r["us"] < 0 or r.get("bin", "default") != "default":
                continue
            key = (names[r["what"]], summary.fmt_size(r["bytes"]), r["algo"])
            best[key] = min(best.get(key, r["us"]), r["us"])
        self.assertEqual(set(self.rows), set(best))
        for key, us in best.items():
            self.assertEqual(self.rows[key][0], f"{us:.2f}", key)
        # The figure the misfiling hid.
        self.assertEqual(self.rows[("all-reduce", "16 MiB", "auto")][0], "59.33")

    def test_the_document_holds_this_table(self):
        with open(os.path.join(ROOT, DOC)) as f:
            doc = f.read()
        start = self.section.split("\n", 1)[0]
        self.assertIn(start, doc)
        in_doc = doc[doc.index(start):].split("\n## ", 1)[0].rstrip()
        self.assertEqual(in_doc, self.section.rstrip(),
                         "docs/performance.md's fused-collectives table is not what bench/report.py makes of "
                         f"{COLL}: regenerate the document (the command is in docs/gpu.md; docs/performance.md names the files)")


if __name__ == "__main__":
    if len(sys.argv) > 1 and not sys.argv[1].startswith("-"):
        ROOT = os.path.abspath(sys.argv.pop(1))
    unittest.main(verbosity=2)
