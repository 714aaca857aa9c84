"""Three MCP client processes against one ENGRAM_HOME: interleaved writes and reads, nothing lost."""

from __future__ import annotations

import json
import subprocess
import sys

import anyio
import pytest

from tests.stdio_support import TIMEOUT, engram_env, ok, stdio, stop_engram_daemon

pytestmark = pytest.mark.model

WORKERS = 3
OPS = 300  # per worker: a store, then a recall of what it just stored, alternately

# Each worker is its own process with its own `python -m engram` stdio server, as three agents
# on one machine would be. Contents are random word salads around a unique token, so the
# resolver keeps them apart and every token has exactly one memory to be found by.
WORKER = r"""
import anyio, json, os, random, sys
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters

WORDS = '''apple river engine window garden pencil rocket candle forest marble harbor violin tunnel
blanket compass ladder meadow cabinet lantern saddle pepper glacier mirror orchard bucket falcon quartz
hammer basket canyon feather helmet island jacket kettle lemon magnet needle oyster parrot quilt ribbon
spider tractor umbrella valley walnut yogurt zipper anchor barrel carpet dolphin eagle fountain guitar
hazel igloo jungle kayak lobster mango nutmeg olive pirate rabbit salmon tomato velvet wizard badger
cactus donkey elbow fabric goblet hollow insect jigsaw kitten lagoon mitten noodle otter pebble radish
sponge thimble tulip vacuum wagon yacht beacon cobalt dagger ember fossil gravel hatchet ivory juniper
kernel'''.split()

async def main(worker, ops):
    rng = random.Random(worker)
    params = StdioServerParameters(command=sys.executable, args=["-m", "engram"], env=dict(os.environ))
    stored, errors = [], []
    async with Client(params, read_timeout_seconds=float(os.environ["TEST_TIMEOUT"])) as c:
        for i in range(ops):
            if i % 2 == 0:
                token = f"w{worker}tok{i:04d}z"
                content = f"Note {token}: " + " ".join(rng.sample(WORDS, 6)) + "."
                r = await c.call_tool("store_memory", {"content": content, "tags": [f"worker-{worker}"]})
                if r.is_error:
                    errors.append(f"store {token}: {r.content[0].text}")
                else:
                    stored.append([token, r.structured_content["memory_id"], r.structured_content["action"]])
            elif stored:
                token, memory_id, _ = stored[-1]
                r = await c.call_tool("recall_memory", {"query": token, "mode": "bm25",
                                                        "memory_type": "fact", "limit": 3})
                if r.is_error:
                    errors.append(f"recall {token}: {r.content[0].text}")
                elif memory_id not in [m["id"] for m in r.structured_content["memories"]]:
                    errors.append(f"recall {token}: own write not visible")
    print(json.dumps({"stored": stored, "errors": errors}))

anyio.run(main, int(sys.argv[1]), int(sys.argv[2]))
"""


@pytest.fixture
def home(tmp_path):
    home = tmp_path / "home"
    yield home
    stop_engram_daemon(home)


def test_three_client_processes_interleave_without_losing_anything(home):
    env = {**engram_env(home, "default"), "TEST_TIMEOUT": str(TIMEOUT)}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, str(w), str(OPS)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for w in range(WORKERS)
    ]
    results = []
    for p in procs:
        out, err = p.communicate(timeout=600)
        assert p.returncode == 0, err[-3000:]
        results.append(json.loads(out.strip().splitlines()[-1]))

    assert [r["errors"] for r in results] == [[]] * WORKERS
    stored = [s for r in results for s in r["stored"]]
    assert len(stored) == WORKERS * OPS // 2
    assert len({memory_id for _, memory_id, _ in stored}) == len(stored)
    assert {action for _, _, action in stored} == {"new"}

    async def verify() -> list[str]:
        missing = []
        async with stdio(home, "default") as c:
            for token, memory_id, _ in stored:
                rec = await ok(c, "recall_memory", {"query": token, "mode": "bm25", "memory_type": "fact", "limit": 1})
                hits = rec["memories"]
                if not hits or hits[0]["id"] != memory_id or token not in hits[0]["content"]:
                    missing.append(token)
            stats = await ok(c, "memory_stats")
        assert stats["by_status"] == {"active": len(stored)}
        assert stats["index"]["fresh"] is True
        return missing

    assert anyio.run(verify) == []
