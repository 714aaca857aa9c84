"""The suite's own scheduling list: a file LONG_FILES names that was renamed or removed would
silently stop being sent out first."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import LONG_FILES

TESTS = Path(__file__).resolve().parents[1]


def test_every_long_file_named_exists_once():
    assert len(set(LONG_FILES)) == len(LONG_FILES)
    missing = [name for name in LONG_FILES if not (TESTS / name).is_file()]
    assert not missing, missing
