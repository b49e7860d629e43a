"""The `isrlab` command's entry point: nothing but the standard library is imported
before Ctrl-C is handled, so an interrupt while isrlab's own modules (Spark's,
Docker's) are still importing is the documented line and exit 3, not a traceback."""

from __future__ import annotations

import sys

INTERRUPTED = 3  # harness.errors.RunIncomplete.exit_code (docs/exit-codes.md)


def main() -> int:
    try:
        from harness.cli import main as cli_main

        return cli_main()
    except KeyboardInterrupt:
        # harness.cli turns an interrupt during a command into this same line; this
        # one is for the ~1 s of imports (and argument parsing) before it can.
        print("isrlab: interrupted", file=sys.stderr)
        return INTERRUPTED
