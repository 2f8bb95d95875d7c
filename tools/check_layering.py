#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The include check (Bazel's layering_check rule, for a toolchain without
one): every #include of a header of the workspace must name a header that the
including target declares itself (srcs, hdrs) or that a DIRECT dependency
exports (its hdrs; a dependency's srcs are private, and reaching a header
through a dependency of a dependency is not enough). Device code compiled by
genrules (mori_device_library, the Triton bitcode) may include what its srcs
list, through filegroups. And the include graph between packages has no
cycle.

    tools/check_layering.py              check the workspace (bazel query)
    tools/check_layering.py --self-test  show it fails on planted violations

Reads the targets with one `bazel query --output=xml` (select() branches
united: an include under any platform's #if is checked against the deps of
every platform), then the sources themselves. Prints one line per violation
(target, file:line, the header, the package that owns it and the targets
that export it) and exits 1 if there is any. Headers that resolve to no file
of the workspace (the C library, GoogleTest, CUDA, torch) are not checked.
"""
import collections
import os
import re
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

QUERY = 'kind("cc_library|cc_binary|cc_test|genrule|filegroup|alias", //...)'
SOURCE_EXTENSIONS = (".c", ".cc", ".cpp", ".cu", ".h", ".hpp", ".cuh", ".inc")
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')


def label_path(label):
    """//pkg:name -> (pkg, name, workspace path); None for other repos."""
    if not label.startswith("//"):
        return None
    pkg, _, name = label[2:].partition(":")
    return pkg, name, (pkg + "/" + name) if pkg else name


def package_of(label):
    return label[2:].partition(":")[0] if label.startswith("//") else label


class Rule:
    def __init__(self, label, kind):
        self.label, self.kind = label, kind
        self.lists = collections.defaultdict(list)
        self.strings = {}


def parse_query_xml(text):
    rules = {}
    for element in ET.fromstring(text).findall("rule"):
        rule = Rule(element.get("name"), element.get("class"))
        for attr in element:
            name = attr.get("name")
            if attr.tag == "list":
                rule.lists[name] = [item.get("value") for item in attr if item.get("value") is not None]
            elif attr.tag in ("label", "string", "boolean") and attr.get("value") is not None:
                rule.strings[name] = attr.get("value")
        rules[rule.label] = rule
    return rules


class Workspace:
    def __init__(self, root, rules):
        self.root, self.rules = root, rules
        # header path -> cc targets that export it (hdrs) / hold it (srcs)
        self.exported_by = collections.defaultdict(set)
        self.held_by = collections.defaultdict(set)
        # include spelling (relative to an `includes` dir) -> header paths
        self.by_include_dir = collections.defaultdict(set)
        # target -> the aliases that stand for it (errors name those: they
        # are what BUILD files write)
        self.aliases = collections.defaultdict(list)
        for rule in rules.values():
            if rule.kind == "alias":
                self.aliases[self.actual(rule.label)].append(rule.label)
        for rule in rules.values():
            if not rule.kind.startswith("cc_"):
                continue
            pkg = package_of(rule.label)
            include_dirs = [os.path.normpath(os.path.join(pkg, d)) for d in rule.lists["includes"]]
            for attr in ("hdrs", "textual_hdrs", "srcs"):
                for path in self.files(rule.lists[attr]):
                    if not path.endswith(SOURCE_EXTENSIONS):
                        continue
                    (self.held_by if attr == "srcs" else self.exported_by)[path].add(rule.label)
                    for d in include_dirs:
                        if path.startswith(d + "/"):
                            self.by_include_dir[path[len(d) + 1:]].add(path)

    def actual(self, label):
        """Follows aliases to the target they stand for."""
        seen = set()
        while label in self.rules and self.rules[label].kind == "alias" and label not in seen:
            seen.add(label)
            label = self.rules[label].strings.get("actual", label)
        return label

    def files(self, labels, seen=None):
        """Workspace paths of source files named by labels, through filegroups."""
        seen = set() if seen is None else seen
        out = []
        for label in labels:
            label = self.actual(label)
            if label in seen:
                continue
            seen.add(label)
            rule = self.rules.get(label)
            if rule is not None:
                if rule.kind == "filegroup":
                    out += self.files(rule.lists["srcs"], seen)
                continue  # a rule's outputs are not sources
            parts = label_path(label)
            if parts and os.path.isfile(os.path.join(self.root, parts[2])):
                out.append(parts[2])
        return out

    def resolve(self, including_file, quote, spelling, extra_dirs=()):
        """The workspace header an #include names, or None (not ours)."""
        candidates = []
        if quote:
            candidates.append(os.path.normpath(os.path.join(os.path.dirname(including_file), spelling)))
        candidates.append(os.path.normpath(spelling))
        candidates += [os.path.normpath(os.path.join(d, spelling)) for d in extra_dirs]
        for path in candidates:
            if path in self.exported_by or path in self.held_by or os.path.isfile(os.path.join(self.root, path)):
                if not path.startswith(".."):
                    return path
        found = sorted(self.by_include_dir.get(os.path.normpath(spelling), ()))
        return found[0] if found else None

    def includes_of(self, path):
        try:
            with open(os.path.join(self.root, path), encoding="utf-8", errors="replace") as f:
                for number, line in enumerate(f, 1):
                    m = INCLUDE.match(line)
                    if m:
                        yield number, m.group(1) == '"', m.group(2)
        except OSError:
            return

    def named(self, label):
        return " or ".join(sorted(self.aliases[label]) + [label])

    def is_test(self, rule):
        return rule.kind == "cc_test" or rule.strings.get("testonly") in ("1", "true")

    def owner_package(self, header):
        owners = self.exported_by.get(header) or self.held_by.get(header)
        if owners:
            return package_of(sorted(owners)[0])
        return os.path.dirname(header)  # the directory: no target declares it

    def check(self):
        violations, package_edges = [], collections.defaultdict(set)
        for label in sorted(self.rules):
            rule = self.rules[label]
            if rule.kind.startswith("cc_"):
                own = set(self.files(rule.lists["srcs"] + rule.lists["hdrs"] + rule.lists["textual_hdrs"]))
                allowed = set(own)
                for dep in rule.lists["deps"]:
                    dep = self.actual(dep)
                    dep_rule = self.rules.get(dep)
                    if dep_rule is not None and dep_rule.kind.startswith("cc_"):
                        allowed |= set(self.files(dep_rule.lists["hdrs"] + dep_rule.lists["textual_hdrs"]))
                extra_dirs = ()
                checked = own
                how = "is not in the hdrs of %s or of a direct dependency" % label
            elif rule.kind == "genrule":
                own = [p for p in self.files(rule.lists["srcs"]) if p.endswith(SOURCE_EXTENSIONS)]
                if not any(p.endswith((".c", ".cc", ".cu")) for p in own):
                    continue
                # Its own package's files: the headers it lists of other
                # packages are checked with the cc targets that own them.
                allowed = set(own)
                checked = [p for p in own if p.startswith(package_of(label) + "/") or not package_of(label)]
                extra_dirs = re.findall(r"-I(?!\$)(\S+)", rule.strings.get("cmd", ""))
                how = "is not among the srcs of %s" % label
            else:
                continue
            for path in sorted(checked):
                for line, quote, spelling in self.includes_of(path):
                    header = self.resolve(path, quote, spelling, extra_dirs)
                    if header is None:
                        continue
                    owner = self.owner_package(header)
                    # The SDK's layering: a test next to the code it tests
                    # (and the test support it includes) adds no edge.
                    if owner != package_of(label) and not self.is_test(rule):
                        package_edges[package_of(label)].add(owner)
                    if header in allowed:
                        continue
                    exporters = sorted(self.exported_by.get(header, ()))
                    offer = ("exported by " + ", ".join(map(self.named, exporters))) if exporters else (
                        "private to " + ", ".join(sorted(self.held_by[header])) if header in self.held_by else
                        "in no target's hdrs")
                    violations.append("%s: %s:%d includes \"%s\" (package //%s, %s), which %s" %
                                      (label, path, line, spelling, owner, offer, how))
        return violations, find_cycles(package_edges)


def find_cycles(edges):
    """Strongly connected components of more than one package (Tarjan)."""
    index, low, stack, on_stack, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    sys.setrecursionlimit(10000)
    for v in sorted(set(edges) | {w for ws in edges.values() for w in ws}):
        if v not in index:
            visit(v)
    return out


def report(violations, cycles, edges_hint=""):
    for v in violations:
        print("layering: " + v)
    for c in cycles:
        print("layering: the include graph has a cycle between packages " + " <-> ".join("//" + p for p in c))
    return 1 if violations or cycles else 0


def check_workspace(root):
    out = subprocess.run(["bazel", "query", "--noshow_progress", "--output=xml", QUERY], cwd=root,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
    if out.returncode != 0:
        sys.stderr.write(out.stderr)
        print("layering: bazel query failed (exit %d)" % out.returncode)
        return 1
    ws = Workspace(root, parse_query_xml(out.stdout))
    violations, cycles = ws.check()
    rc = report(violations, cycles)
    cc = sum(1 for r in ws.rules.values() if r.kind.startswith("cc_"))
    print("layering: %d cc targets, %d violations, %d package cycles" % (cc, len(violations), len(cycles)))
    return rc


# A tiny workspace: b uses a properly; c reaches a only through b (a
# dependency of a dependency); c also includes b's private header; and the
# packages d and e include each other.
FIXTURE_FILES = {
    "a/a.h": "int a(void);\n",
    "a/a.c": '#include "a/a.h"\n',
    "b/b.h": '#include "a/a.h"\n',
    "b/private.h": "\n",
    "b/b.c": '#include "b/b.h"\n#include "a/a.h"\n#include "private.h"\n#include <stdio.h>\n',
    "c/c.c": '#include "b/b.h"\n\n#include "a/a.h"\n#include "b/private.h"\n',
    "d/d1.c": '#include "e/e.h"\n',
    "d/include/d/d2.h": "\n",
    "e/e.h": '#include <d/d2.h>\n',
}
FIXTURE_RULES = [
    ("//a:a", "cc_library", {"srcs": ["//a:a.c"], "hdrs": ["//a:a.h"]}),
    ("//b:b", "cc_library", {"srcs": ["//b:b.c", "//b:private.h"], "hdrs": ["//b:b.h"], "deps": ["//b:a_alias"]}),
    ("//b:a_alias", "alias", {"actual": "//a:a"}),
    ("//c:c", "cc_library", {"srcs": ["//c:c.c"], "deps": ["//b:b"]}),
    ("//d:d2", "cc_library", {"hdrs": ["//d:include/d/d2.h"], "includes": ["include"]}),
    ("//e:e", "cc_library", {"hdrs": ["//e:e.h"], "deps": ["//d:d2"]}),
    ("//d:d1", "cc_library", {"srcs": ["//d:d1.c"], "deps": ["//e:e"]}),
]


def fixture_xml():
    query = ET.Element("query")
    for label, kind, attrs in FIXTURE_RULES:
        rule = ET.SubElement(query, "rule", {"class": kind, "name": label})
        for name, value in attrs.items():
            if isinstance(value, list):
                lst = ET.SubElement(rule, "list", {"name": name})
                for v in value:
                    ET.SubElement(lst, "label", {"value": v})
            else:
                ET.SubElement(rule, "label", {"name": name, "value": value})
    return ET.tostring(query, encoding="unicode")


def self_test():
    with tempfile.TemporaryDirectory() as root:
        for path, text in FIXTURE_FILES.items():
            os.makedirs(os.path.join(root, os.path.dirname(path)), exist_ok=True)
            with open(os.path.join(root, path), "w") as f:
                f.write(text)
        violations, cycles = Workspace(root, parse_query_xml(fixture_xml())).check()
    expected = [
        '//c:c: c/c.c:3 includes "a/a.h" (package //a, exported by //b:a_alias or //a:a), which is not in the hdrs '
        'of //c:c or of a direct dependency',
        '//c:c: c/c.c:4 includes "b/private.h" (package //b, private to //b:b), which is not in the hdrs of //c:c or '
        'of a direct dependency',
    ]
    problems = []
    if violations != expected:
        problems.append("violations:\n  got      %s\n  expected %s" % ("\n           ".join(violations),
                                                                       "\n           ".join(expected)))
    if cycles != [["d", "e"]]:
        problems.append("cycles: got %s, expected [['d', 'e']]" % cycles)
    for p in problems:
        print("layering self-test: " + p)
    print("layering self-test: %s (%d planted violations and one package cycle %s)" %
          ("FAILED" if problems else "passed", len(expected), "missed" if problems else "found"))
    return 1 if problems else 0


if __name__ == "__main__":
    if sys.argv[1:] == ["--self-test"]:
        sys.exit(self_test())
    if sys.argv[1:]:
        sys.exit("usage: tools/check_layering.py [--self-test]")
    sys.exit(check_workspace(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
