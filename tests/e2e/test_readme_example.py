"""The Python API example in docs/python-api.md runs as written and prints what it says."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "python-api.md"


@pytest.mark.model
def test_python_api_example_runs_as_written(tmp_path):
    code = re.search(r"# Python API\n\n```python\n(.*?)```", DOC.read_text(), re.S).group(1)
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        env={
            "ENGRAM_HOME": str(tmp_path),
            "HF_HUB_OFFLINE": "1",
            "PATH": "/usr/bin:/bin",
            "ENGRAM_MODEL_CACHE": os.environ["ENGRAM_MODEL_CACHE"],
        },
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[:3] == ["new", "replace", "new"]
    assert lines[3].endswith("The API timeout is 60 seconds.")
    assert lines[-1] == "done"
