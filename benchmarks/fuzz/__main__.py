"""The property tests of every reader of outside input, run long (issue 46).

    python -m benchmarks.fuzz [--examples 2000] [--seed N] [--results]

The same tests as the test command (PROPERTY_TESTS: the three clients' transcript readers and
what capture does with them, the text functions, redaction, damaged export files, the argument
check of every MCP tool and HTTP route), with the "fuzz" Hypothesis profile of tests/conftest.py:
--examples inputs per test instead of 40, drawn at random (a new seed each run unless --seed), so
a long run explores what the bounded, deterministic one in the test command does not. Prints
each crash found (the test, the falsifying input) and a summary; --results appends the run's
section to benchmarks/RESULTS.md. Each crash found becomes a plain regression test and a fix.
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PROPERTY_TESTS = [
    "tests/hooks/test_transcript_properties.py",
    "tests/text/test_text_properties.py",
    "tests/unit/test_redaction_properties.py",
    "tests/store/test_export_import_properties.py",
    "tests/server/test_argument_check_properties.py",
]


class _Collect:
    """A pytest plugin keeping each test's outcome and, for a failure, Hypothesis's falsifying input."""

    def __init__(self) -> None:
        self.outcomes: dict[str, str] = {}
        self.crashes: list[tuple[str, str]] = []

    def pytest_runtest_logreport(self, report) -> None:
        if report.when == "call" or report.failed:
            self.outcomes[report.nodeid] = report.outcome
        if report.failed:
            text = report.longreprtext
            start = text.find("Falsifying example")
            self.crashes.append((report.nodeid, text[start if start >= 0 else -3000 :][:3000]))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--examples", type=int, default=2000, help="inputs per property test (default 2000)")
    ap.add_argument("--seed", type=int, help="Hypothesis seed (default: a random one, printed)")
    ap.add_argument("--results", action="store_true", help="append this run's section to benchmarks/RESULTS.md")
    ap.add_argument("tests", nargs="*", help=f"test files (default: {' '.join(PROPERTY_TESTS)})")
    a = ap.parse_args(argv)
    seed = a.seed if a.seed is not None else random.SystemRandom().randrange(2**32)
    os.environ.update(ENGRAM_HYPOTHESIS_PROFILE="fuzz", ENGRAM_FUZZ_EXAMPLES=str(a.examples), HF_HUB_OFFLINE="1")
    os.chdir(ROOT)
    collect = _Collect()
    start = time.monotonic()
    pytest.main(
        ["-q", "-p", "no:cacheprovider", f"--hypothesis-seed={seed}", *(a.tests or PROPERTY_TESTS)], plugins=[collect]
    )
    minutes = (time.monotonic() - start) / 60
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT).stdout
    passed = sum(o == "passed" for o in collect.outcomes.values())
    lines = [
        f"**Fuzz run** (`python -m benchmarks.fuzz --examples {a.examples} --seed {seed}`, "
        f"{datetime.now(UTC):%Y-%m-%d}, commit {commit.strip()}, {minutes:.0f} min): {len(collect.outcomes)} property "
        f"tests at up to {a.examples} inputs each, {passed} passed, {len(collect.crashes)} crashes.",
    ]
    for nodeid, detail in collect.crashes:
        lines += ["", f"- `{nodeid}`:", "", "```", detail.strip(), "```"]
    report = "\n".join(lines) + "\n"
    print(report)
    if a.results:
        with (ROOT / "benchmarks" / "RESULTS.md").open("a", encoding="utf-8") as f:
            f.write("\n" + report)
    return 1 if collect.crashes else 0


if __name__ == "__main__":
    sys.exit(main())
