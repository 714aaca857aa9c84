"""A labelled agent-memory set run through a real `engram` stdio MCP server: Hit@1/Hit@3 per kind per mode.

For each search mode (bm25, vector, hybrid) one `python -m engram` stdio process, as its own user
in one temporary ENGRAM_HOME (so one daemon, and modes do not see each other's recall counts),
stores the set's memories in order with store_memory in one session, then asks every query with
recall_memory(mode=..., limit=5). The queries run in file order and their recalls reinforce what
they return, as an agent's would; each mode sees the same order.

For the `none` kind (nothing stored answers the question) it reports the share of queries that
returned no memory and how many memories had their recall count raised by them (read before
and after with get_memory over the daemon's socket, which reinforces nothing). In the hybrid
session it also calls get_context for each none query: an empty <memory> block is expected.
For the other kinds, beside Hit@k: precision (the share of what a query returns that is
labelled relevant) and the mean number of unrelated memories returned, so reinforced, per
query (benchmarks/precision.py, the same definitions as benchmarks.recall_eval). The held-out
labels are used as written: one memory per query, so precision here is a lower bound.

    HF_HUB_OFFLINE=1 .venv/bin/python -m benchmarks.agent_mcp [--set PATH] [--out report.json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters

from benchmarks.precision import precision
from engram.core.settings import Settings
from engram.server.daemon import stop_or_kill
from engram.server.rpc_client import RpcClient

DEFAULT_SET = Path(__file__).resolve().parent.parent / "tests" / "data" / "agent_heldout.json"
MODES = ("bm25", "vector", "hybrid")
KINDS = ("paraphrase", "distractor", "exact", "typo", "chinese", "none")
ANSWERED = KINDS[:-1]
LIMIT = 5
# The first call may wait for the daemon to start and load the embedding model.
TIMEOUT = 180
MEMORY_FIELDS = {"key", "content", "tags", "memory_type", "corrects"}


def load_set(path: str | Path) -> dict:
    """The set file, checked: unique keys, known kinds, expected keys that exist, none queries expect []."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    if (
        not isinstance(data, dict)
        or not isinstance(data.get("memories"), list)
        or not isinstance(data.get("queries"), list)
    ):
        raise ValueError(f"{path}: expected an object with 'memories' and 'queries' lists")
    keys: set[str] = set()
    for i, m in enumerate(data["memories"]):
        if not isinstance(m, dict) or not isinstance(m.get("key"), str) or not isinstance(m.get("content"), str):
            raise ValueError(f"{path}: memories[{i}] needs a string 'key' and 'content'")
        unknown = set(m) - MEMORY_FIELDS
        if unknown:
            raise ValueError(f"{path}: memories[{i}] ({m['key']}) has unknown field(s) {sorted(unknown)}")
        if m["key"] in keys:
            raise ValueError(f"{path}: memory key {m['key']!r} is used twice")
        if "corrects" in m and m["corrects"] not in keys:
            raise ValueError(f"{path}: {m['key']} corrects {m['corrects']!r}, which is not stored before it")
        keys.add(m["key"])
    for i, q in enumerate(data["queries"]):
        if (
            not isinstance(q, dict)
            or q.get("kind") not in KINDS
            or not isinstance(q.get("query"), str)
            or not isinstance(q.get("expect"), list)
        ):
            raise ValueError(
                f"{path}: queries[{i}] needs 'kind' (one of {', '.join(KINDS)}), a string 'query' and an 'expect' list"
            )
        missing = [k for k in q["expect"] if k not in keys]
        if missing:
            raise ValueError(f"{path}: queries[{i}] ({q['query']!r}) expects unknown key(s) {missing}")
        if (q["kind"] == "none") != (not q["expect"]):
            raise ValueError(
                f"{path}: queries[{i}] ({q['query']!r}): a none query expects [], any other kind at least one key"
            )
    return data


def slice_set(data: dict, memories: int, per_kind: int) -> dict:
    """The first `memories` memories and up to `per_kind` queries of each kind that they answer."""
    mems = data["memories"][:memories]
    keys = {m["key"] for m in mems}
    taken: Counter[str] = Counter()
    queries = []
    for q in data["queries"]:
        if taken[q["kind"]] < per_kind and all(k in keys for k in q["expect"]):
            taken[q["kind"]] += 1
            queries.append(q)
    return {"memories": mems, "queries": queries}


def engram_env(home: Path, user: str, extra: dict[str, str] | None = None) -> dict[str, str]:
    """The server's environment: ours, the home and user, and `extra` (settings such as ENGRAM_RERANK)."""
    return {**os.environ, "ENGRAM_HOME": str(home), "ENGRAM_USER": user, "HF_HUB_OFFLINE": "1", **(extra or {})}


async def call(client: Client, tool: str, args: dict) -> dict:
    r = await client.call_tool(tool, args)
    if r.is_error:
        raise RuntimeError(f"{tool} failed: {r.content[0].text}")
    return r.structured_content


async def store_all(client: Client, memories: list[dict]) -> tuple[dict[str, str], dict]:
    """Store in order; returns key -> memory id and what resolution did (actions, merges, replacements)."""
    key_id: dict[str, str] = {}
    id_keys: dict[str, list[str]] = {}
    actions: Counter[str] = Counter()
    merged, replaced, corrected = [], [], set()
    for m in memories:
        args = {"content": m["content"], "memory_type": m.get("memory_type", "fact")}
        if m.get("tags"):
            args["tags"] = m["tags"]
        r = await call(client, "store_memory", args)
        actions[r["action"]] += 1
        key_id[m["key"]] = r["memory_id"]
        if r["action"] in ("merge", "reinforce"):
            merged.append({"key": m["key"], "action": r["action"], "into": id_keys[r["memory_id"]]})
        if r["action"] == "replace":
            old = id_keys[r["previous_id"]]
            if m.get("corrects") in old:
                corrected.add(m["key"])
            else:
                replaced.append({"key": m["key"], "replaced": old})
        id_keys.setdefault(r["memory_id"], []).append(m["key"])
    missed = [m["key"] for m in memories if "corrects" in m and m["key"] not in corrected]
    return key_id, {
        "actions": dict(actions),
        "merged": merged,
        "replaced_unexpectedly": replaced,
        "corrections_not_replacing": missed,
    }


def recall_counts(home: Path, user: str, ids: list[str]) -> dict[str, int]:
    """Each memory's recall count, read with get_memory over the daemon's socket (no reinforcement)."""
    settings = Settings.from_env({"ENGRAM_HOME": str(home)})
    with RpcClient(settings.socket_path, client="agent-mcp-audit", user_id=user) as rpc:
        return {i: rpc.call("get_memory", memory_id=i)["recall_count"] for i in dict.fromkeys(ids)}


def grew(before: dict[str, int], after: dict[str, int]) -> int:
    return sum(after[i] > n for i, n in before.items())


async def run_mode(home: Path, mode: str, data: dict, context: bool, env: dict[str, str] | None = None) -> dict:
    """One stdio session as user heldout-<mode>: store everything, ask everything in `mode`."""
    user = f"heldout-{mode}"
    params = StdioServerParameters(command=sys.executable, args=["-m", "engram"], env=engram_env(home, user, env))
    async with Client(params, read_timeout_seconds=TIMEOUT) as client:
        key_id, stores = await store_all(client, data["memories"])
        keys_of: dict[str, list[str]] = {}
        for k, i in key_id.items():
            keys_of.setdefault(i, []).append(k)
        tops = []
        for q in data["queries"]:
            if q["kind"] == "none":
                continue  # asked last, between two reads of the recall counts
            tops.append(await ask(client, q, mode, keys_of))
        ids = list(key_id.values())
        before = await anyio.to_thread.run_sync(recall_counts, home, user, ids)
        nones = [await ask(client, q, mode, keys_of) for q in data["queries"] if q["kind"] == "none"]
        after = await anyio.to_thread.run_sync(recall_counts, home, user, ids)
        out = {"stores": stores, "answers": tops + nones, "none_reinforced": grew(before, after)}
        if context:
            blocks = [
                await call(client, "get_context", {"query": q["query"]}) for q in data["queries"] if q["kind"] == "none"
            ]
            final = await anyio.to_thread.run_sync(recall_counts, home, user, ids)
            out["context_none"] = {
                "n": len(blocks),
                "empty": share(not b["memory_ids"] for b in blocks),
                "mean_memories": mean(len(b["memory_ids"]) for b in blocks),
                "reinforced": grew(after, final),
            }
        return out


async def ask(client: Client, q: dict, mode: str, keys_of: dict[str, list[str]]) -> dict:
    r = await call(client, "recall_memory", {"query": q["query"], "mode": mode, "limit": LIMIT})
    top = [["+".join(keys_of.get(m["id"], ["?"])), round(m["score"], 4), m.get("confidence")] for m in r["memories"]]
    return {"kind": q["kind"], "query": q["query"], "expect": q["expect"], "top": top}


def relevant(answer: dict) -> list[bool]:
    """One flag per returned memory: does it hold (alone or merged) an expected key?"""
    return [bool(set(t[0].split("+")) & set(answer["expect"])) for t in answer["top"]]


def strong_hit(answer: dict, k: int) -> bool:
    """A memory marked strong among the first k that holds an expected key."""
    return any(rel and t[2] == "strong" for rel, t in zip(relevant(answer)[:k], answer["top"]))


def hit(answer: dict, k: int) -> bool:
    return any(relevant(answer)[:k])


def share(flags) -> float:
    flags = list(flags)
    return round(sum(flags) / len(flags), 3) if flags else 0.0


def mean(values) -> float:
    values = list(values)
    return round(sum(values) / len(values), 2) if values else 0.0


def summarise(answers: list[dict]) -> dict:
    kinds = {}
    for kind in ANSWERED:
        mine = [a for a in answers if a["kind"] == kind]
        kinds[kind] = {
            "n": len(mine),
            "hit1": share(hit(a, 1) for a in mine),
            "hit3": share(hit(a, 3) for a in mine),
            "strong3": share(strong_hit(a, 3) for a in mine),
        }
        p = precision((a["kind"], relevant(a)) for a in mine)
        kinds[kind].update(precision=round(p["precision"], 3), unrelated=round(p["unrelated"], 2))
    p = precision((a["kind"], relevant(a)) for a in answers)
    nones = [a for a in answers if a["kind"] == "none"]
    none = {
        "n": len(nones),
        "empty": share(not a["top"] for a in nones),
        "mean_returned": mean(len(a["top"]) for a in nones),
        "no_strong": share(not any(t[2] == "strong" for t in a["top"]) for a in nones),
    }
    asked = [a for a in answers if a["kind"] != "none"]
    answered = {
        "n": p["n"],
        "precision": round(p["precision"], 3),
        "unrelated": round(p["unrelated"], 2),
        "hit3": share(hit(a, 3) for a in asked),
        "strong3": share(strong_hit(a, 3) for a in asked),
    }
    return {"kinds": kinds, "answered": answered, "none": none}


async def run_set(data: dict, home: Path, modes: tuple[str, ...] = MODES, env: dict[str, str] | None = None) -> dict:
    """The report for `data` (a loaded set) in each mode, against the daemon of ENGRAM_HOME `home`
    (started with `env` added to ours: a home's daemon reads its settings once)."""
    start = time.perf_counter()
    report: dict[str, Any] = {
        "memories": len(data["memories"]),
        "queries": len(data["queries"]),
        "limit": LIMIT,
        "modes": {},
        "details": {},
    }
    for mode in modes:
        out = await run_mode(home, mode, data, context=mode == "hybrid", env=env)
        summary = summarise(out["answers"])
        summary["none"]["reinforced_memories"] = out["none_reinforced"]
        summary["stores"] = out["stores"]
        report["modes"][mode] = summary
        report["details"][mode] = out["answers"]
        if "context_none" in out:
            report["context_none"] = out["context_none"]
    report["seconds"] = round(time.perf_counter() - start, 1)
    return report


def stop_engram_daemon(home: Path) -> None:
    stop_or_kill(Settings.from_env({"ENGRAM_HOME": str(home)}))  # no daemon may outlive the run


def markdown(report: dict) -> str:
    modes = list(report["modes"])
    head = "| kind | n | " + " | ".join(f"{m} H@1 / H@3 / prec / unrel / strong@3" for m in modes) + " |"
    lines = [head, "|" + "---|" * (2 + len(modes))]
    for kind in ANSWERED:
        n = report["modes"][modes[0]]["kinds"][kind]["n"]
        cells = " | ".join(
            "{hit1:.2f} / {hit3:.2f} / {precision:.2f} / {unrelated:.2f} / {strong3:.2f}".format(
                **report["modes"][m]["kinds"][kind]
            )
            for m in modes
        )
        lines.append(f"| {kind} | {n} | {cells} |")
    n = report["modes"][modes[0]]["answered"]["n"]
    lines.append(
        f"| answered, all kinds | {n} | "
        + " | ".join(
            "H@3 {hit3:.2f} / prec {precision:.2f} / unrel {unrelated:.2f} / strong@3 {strong3:.2f}".format(
                **report["modes"][m]["answered"]
            )
            for m in modes
        )
        + " |"
    )
    n = report["modes"][modes[0]]["none"]["n"]
    lines.append("")
    lines.append("| none queries (nothing stored answers them) | n | " + " | ".join(modes) + " |")
    lines.append("|" + "---|" * (2 + len(modes)))
    for label, field in (
        ("returned no memory (share)", "empty"),
        ("returned no strong memory (share)", "no_strong"),
        ("memories returned (mean)", "mean_returned"),
        ("memories reinforced by them", "reinforced_memories"),
    ):
        lines.append(f"| {label} | {n} | " + " | ".join(str(report["modes"][m]["none"][field]) for m in modes) + " |")
    c = report.get("context_none")
    if c:
        lines.append("")
        lines.append(
            f"get_context on the {c['n']} none queries: empty block {c['empty']:.2f} of them, "
            f"{c['mean_memories']} memories per block on average, {c['reinforced']} memories reinforced."
        )
    s = report["modes"][modes[0]]["stores"]
    lines.append("")
    lines.append(
        f"Store actions ({modes[0]} session): {json.dumps(s['actions'])}; merged or reinforced: "
        f"{len(s['merged'])}; replaced a memory it does not correct: {len(s['replaced_unexpectedly'])}; "
        f"corrections that did not replace: {len(s['corrections_not_replacing'])}."
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--set", default=str(DEFAULT_SET), help="set file (default: the held-out set)")
    p.add_argument("--out", help="write the JSON report here")
    p.add_argument("--modes", default=",".join(MODES), help="comma-separated search modes")
    a = p.parse_args(argv)
    modes = tuple(m.strip() for m in a.modes.split(",") if m.strip())
    bad = [m for m in modes if m not in MODES]
    if bad:
        p.error(f"unknown mode(s) {bad}; choose from {', '.join(MODES)}")
    data = load_set(a.set)
    with tempfile.TemporaryDirectory(prefix="engram-agent-mcp-") as tmp:
        home = Path(tmp)
        try:
            report = anyio.run(run_set, data, home, modes)
        finally:
            stop_engram_daemon(home)
    report = {"set": a.set, "date": datetime.now(UTC).isoformat(timespec="seconds"), **report}
    print(markdown(report))
    if a.out:
        Path(a.out).write_text(json.dumps(report, indent=1, ensure_ascii=False), encoding="utf-8")
    return report


if __name__ == "__main__":
    main()
