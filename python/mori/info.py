# SPDX-License-Identifier: MIT
"""`python -m mori.info [--json] [--comm]`: the report of the mori_info
program (docs/troubleshooting.md), printed by the libmori.so this process
loads (mori._lib picks host, cuda or hip), so a pip install has it without a
separate binary. Under a launcher, `--comm` adds how each rank reaches each
peer; rank 0 prints the report.

report(json=False, comm=False) returns the same text (a string) to Python
code; with json=True, parsed (a dict)."""
import ctypes
import json as _json
import sys
import tempfile

MORI_INFO_JSON = 1 << 0
MORI_INFO_COMM = 1 << 1

USAGE = """usage: python -m mori.info [--json] [--comm]

Prints mori's version and platform, the devices and their architecture, the
handle types that work, the transports (and why one is unavailable), the
heap's settings and every MORI_* variable set, with a warning for a name
mori does not know.

  --json    one JSON document instead of text
  --comm    under a launcher (mori_launch -n 4 python -m mori.info --comm):
            make a comm over every rank and add how each rank reaches each
            peer (LSA team, transport and why, rail, NIC); rank 0 prints
"""


def _write(fd, flags):
    from mori import _lib

    fn = _lib.lib.mori_info_write
    fn.restype = ctypes.c_int
    fn.argtypes = [ctypes.c_int, ctypes.c_uint]
    rc = fn(fd, flags)
    if rc:
        _lib.lib.mori_last_error.restype = ctypes.c_char_p
        _lib.lib.mori_err_name.restype = ctypes.c_char_p
        raise RuntimeError(f"mori_info: {_lib.lib.mori_err_name(rc).decode()}: {_lib.lib.mori_last_error().decode()}")


def report(json=False, comm=False):
    """The report as text, or with json=True as a dict ({} on a rank other
    than 0 under comm=True, which prints nothing). When the report fails
    (under comm=True, a comm that cannot be made), the RuntimeError's
    `report` holds the text of what was found before."""
    flags = (MORI_INFO_JSON if json else 0) | (MORI_INFO_COMM if comm else 0)
    with tempfile.TemporaryFile() as f:
        try:
            _write(f.fileno(), flags)
        except RuntimeError as e:
            f.seek(0)
            e.report = f.read().decode(errors="replace")
            raise
        f.seek(0)
        text = f.read().decode(errors="replace")  # an environment value may hold any bytes
    if json:
        return _json.loads(text) if text else {}
    return text


def main(argv=None):
    flags = 0
    for arg in sys.argv[1:] if argv is None else argv:
        if arg == "--json":
            flags |= MORI_INFO_JSON
        elif arg == "--comm":
            flags |= MORI_INFO_COMM
        elif arg in ("-h", "--help"):
            print(USAGE, end="")
            return 0
        else:
            print(f"python -m mori.info: unknown argument '{arg}'\n{USAGE}", end="", file=sys.stderr)
            return 2
    sys.stdout.flush()
    try:
        _write(sys.stdout.fileno(), flags)
    except (RuntimeError, ImportError, OSError) as e:
        # A library that cannot be loaded (MORI_LIB, MORI_PLATFORM) is what
        # this tool is run to find out about: its message, no traceback.
        print(f"python -m mori.info: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
