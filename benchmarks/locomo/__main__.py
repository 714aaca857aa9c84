"""Entry point: python -m benchmarks.locomo."""

import sys

from .run import main

sys.exit(main())
