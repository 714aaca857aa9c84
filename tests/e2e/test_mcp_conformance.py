"""The official MCP conformance suite (npm @modelcontextprotocol/conformance, under the Node 22 it
needs, both from tests/e2e/clients/package.json) against `engram serve --http`.

The suite's other server scenarios call fixtures of its reference server (tools named
`test_image_content`, resources `test://static-text`, prompts `test_simple_prompt`, sampling and
elicitation round trips): a server without those fails them whatever it does right.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
from clients_support import client_bin

from tests.support.http_server import serving

pytestmark = [pytest.mark.model, pytest.mark.duckdb_only]

# Every server scenario `conformance list --server` (0.1.16) names that any server can pass.
SCENARIOS = (
    "server-initialize",
    "ping",
    "logging-set-level",
    "completion-complete",
    "tools-list",
    "tools-call-error",
    "resources-list",
    "prompts-list",
    "server-sse-multiple-streams",
    "dns-rebinding-protection",
)


@pytest.fixture(scope="module")
def url(checked_model_cache):
    home = Path(tempfile.mkdtemp(prefix="egm", dir="/tmp"))  # short: the daemon's socket lives here
    # No token: the suite sends none, and on 127.0.0.1 engram asks for none.
    try:
        with serving(home, "") as (base, _):
            yield base + "/mcp"
    finally:
        shutil.rmtree(home, ignore_errors=True)


def test_the_suite_knows_every_scenario_run_here(tmp_path):
    listed = run_suite(tmp_path, "list", "--server").stdout
    assert set(SCENARIOS) <= set(re.findall(r"^\s*- ([\w-]+)", listed, re.M)), listed


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_conformance_scenario(url, scenario, tmp_path):
    p = run_suite(tmp_path, "server", "--url", url, "--scenario", scenario)
    out = p.stdout + p.stderr
    assert p.returncode == 0, out[-4000:]
    m = re.search(r"Passed: (\d+)/(\d+), (\d+) failed", out)
    assert m and m[1] == m[2] and m[3] == "0" and int(m[1]) > 0, out[-4000:]


def run_suite(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    # The suite writes its results/ folder in its working directory: the test's own.
    return subprocess.run(
        [str(client_bin("node")), str(client_bin("conformance")), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
    )
