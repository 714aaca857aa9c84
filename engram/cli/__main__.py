"""`python -m engram.cli`: the `engram` command (hooks and tests run it this way)."""

import sys

from engram.cli import main

if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
