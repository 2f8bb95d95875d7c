# SPDX-License-Identifier: MIT
"""One generated section of a markdown document, put in place of the one
made before (the text from its title to the next "## " heading), or at the
end when the document has none yet: how the scripts that make one section
of docs/performance.md each (bench/startup.py, tests/gpu/coll_check_table.py)
write it."""


def put_section(doc_path, title, text):
    with open(doc_path) as f:
        doc = f.read()
    if title in doc:
        head, rest = doc.split(title, 1)
        tail = rest.split("\n## ", 1)
        doc = head + text + ("\n## " + tail[1] if len(tail) > 1 else "")
    else:
        doc = doc.rstrip() + "\n\n" + text
    with open(doc_path, "w") as f:
        f.write(doc.rstrip() + "\n")
