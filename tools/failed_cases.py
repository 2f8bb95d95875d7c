#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Print one line per failed test case in the given JUnit XML files (Bazel's
test.xml): the Bazel target, the case, and the start of its message.

tools/test.sh repeats these lines just before its last line, so that whoever
reads only the end of a CI log still learns what failed, where and why.
"""
import re
import sys
import xml.etree.ElementTree as ET

MESSAGE_CHARS = 800


def target_of(path):
    """bazel-testlogs/tests/ep/ep_test_8ranks[/run_2_of_4]/test.xml -> //tests/ep:ep_test_8ranks"""
    parts = path.split("/")
    logs = [i for i, p in enumerate(parts) if p.endswith("testlogs")]
    if logs:
        parts = parts[logs[0] + 1:]
    parts = [p for p in parts[:-1] if not re.fullmatch(r"(run|shard)_\d+_of_\d+", p)]
    if not parts:
        return path
    return "//" + "/".join(parts[:-1]) + ":" + parts[-1]


def one_line(text):
    text = " ".join((text or "").split())
    return text if len(text) <= MESSAGE_CHARS else text[:MESSAGE_CHARS] + "..."


def log_reason(xml_path):
    """For a test that failed without naming a case (a script's exit code,
    "exited with error code 1"): the first line of its test.log that says
    FAIL, else its last non-empty line, so the recap still says why."""
    log = xml_path[: -len("test.xml")] + "test.log"
    try:
        with open(log, errors="replace") as f:
            lines = [l.strip() for l in f if l.strip()]
    except OSError:
        return ""
    for line in lines:
        if "FAIL" in line:
            return line
    return lines[-1] if lines else ""


def failures(path):
    try:
        root = ET.parse(path).getroot()
    except (ET.ParseError, OSError) as e:
        yield f"{target_of(path)}: its test.xml cannot be read ({e})"
        return
    for case in root.iter("testcase"):
        for f in list(case.iter("failure")) + list(case.iter("error")):
            name = ".".join(x for x in (case.get("classname"), case.get("name")) if x)
            message = f.get("message") or f.text
            if re.match(r"exited with error code \d+$", (message or "").strip()):
                reason = log_reason(path)
                if reason:
                    message = f"{message.strip()}: {reason}"
            yield f"{target_of(path)}: {name}: {one_line(message)}"


def main(paths):
    for path in paths:
        for line in failures(path):
            print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
