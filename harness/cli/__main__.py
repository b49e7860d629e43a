"""`python -m harness.cli`: the `isrlab` command."""

import sys

from harness.cli import main

sys.exit(main())
