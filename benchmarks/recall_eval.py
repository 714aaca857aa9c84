"""Recall quality on both kinds of memory in one run: engram's agent-memory set and LoCoMo.

    python -m benchmarks.recall_eval [--out table.md] [--json result.json] [--no-locomo] [--no-heldout]

Run with ENGRAM_RERANK=1 (issue 27's table) or ENGRAM_LATE_INTERACTION=1 (issue 40's): `hybrid` is
then the second stage's order and `hybrid_first` the first stage alone, asked one after the other,
with each recall's time at limit 10.

The agent set (benchmarks/agent/agent_set.json) is stored in order, in one session, one memory
at a time, as an agent writes them; then every query is asked in each mode (bm25, vector,
hybrid, and `plain`, the bare model's cosine over the same texts: benchmarks.plain_cosine) with
reinforce=False and recall's default limit (10). A query counts as a hit at k when
one of its expected memories is in the top k. Beside Hit@k the tables give precision (the share
of what an answered query returns that is labelled relevant) and the mean number of unrelated
memories it returns, and so would reinforce (benchmarks/precision.py, the same definitions as
benchmarks.agent_mcp). For the `none` kind nothing stored answers the query: the figure is the
fraction of those queries that return no memory, and the run also asks them once more with
reinforcement on and reports how many recall counts grew (it should be 0). Figures are given for the tune
half, the report half and both. The held-out set (tests/data/agent_heldout.json) is then asked
through a real MCP server (benchmarks.agent_mcp) with the reranker off and on, the long-session
set (tests/data/long_sessions.json: assistant turns of several hundred words,
benchmarks.long_sessions) is stored and asked, and LoCoMo (all ten conversations) runs through
benchmarks.locomo, all with the same settings.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import defaultdict
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from .plain_cosine import PlainCosine
from .precision import precision

MODES = ("bm25", "vector", "hybrid", "hybrid_first", "plain")
# How each column maps onto recall: hybrid_first is hybrid without the second stage (the same as
# hybrid when ENGRAM_RERANK is off).
MODE_KWARGS = {
    "bm25": {"mode": "bm25"},
    "vector": {"mode": "vector"},
    "hybrid": {"mode": "hybrid"},
    "hybrid_first": {"mode": "hybrid", "rerank": False},
    "plain": {},
}  # the bare model, not engram (benchmarks.plain_cosine)
KINDS = ("paraphrase", "distractor", "exact", "typo", "chinese", "none")
HALVES = ("tune", "report", "all")
SESSION = "agent-session-1"
LIMIT = 10  # recall's default, as an agent asks


def default_set_path() -> Path:
    return Path(__file__).resolve().parent / "agent" / "agent_set.json"


def load_set(path: Path) -> dict:
    doc = json.loads(Path(path).read_text(encoding="utf-8"))
    keys = {m["key"] for m in doc["memories"]}
    for q in doc["queries"]:
        if q["kind"] not in KINDS:
            raise ValueError(f"unknown kind {q['kind']!r} in {q['query']!r}")
        missing = set(q["expect"]) - keys
        if missing:
            raise ValueError(f"{q['query']!r} expects unknown keys {sorted(missing)}")
        if (q["kind"] == "none") != (not q["expect"]):
            raise ValueError(f"{q['query']!r}: only `none` queries expect nothing")
    return doc


SET_START = datetime(2026, 3, 2, 9, 0, tzinfo=timezone.utc)  # the clock the set is stored on


def store_set(eng, clock, doc: dict) -> tuple[dict[str, str], dict[str, int]]:
    """Store the set's memories in order in one session, as an agent writes them; then five
    quiet minutes. Returns {key: memory id} and the count of each write action."""
    ids: dict[str, str] = {}
    actions: dict[str, int] = defaultdict(int)
    for m in doc["memories"]:
        clock.advance(seconds=40)  # one after another, as an agent writes them
        r = eng.store(m["content"], memory_type=m.get("memory_type", "fact"), tags=m.get("tags"), session_id=SESSION)
        ids[m["key"]] = r.memory.id
        actions[r.action] += 1
    clock.advance(minutes=5)
    return ids, dict(actions)


def run_agent_set(doc: dict, settings=None, embedder=None) -> dict[str, Any]:
    """Store the set in order in one session, ask every query in every mode, score."""
    from engram import Engram, Settings, VirtualClock
    from engram.models.embedding import load_embedder

    settings = settings or Settings.from_env()
    embedder = embedder or load_embedder(settings.model, cache_dir=settings.model_cache, threads=settings.torch_threads)
    clock = VirtualClock(SET_START)
    eng = Engram(":memory:", settings=settings, embedder=embedder, clock=clock)
    try:
        ids, actions = store_set(eng, clock, doc)
        plain = PlainCosine(embedder, [m["content"] for m in doc["memories"]], [ids[m["key"]] for m in doc["memories"]])
        # Load what the first recall would (the reranker's model, the reference texts) before timing.
        eng.recall(doc["queries"][0]["query"], limit=LIMIT, reinforce=False)
        rows = []
        for q in doc["queries"]:
            want = {ids[k] for k in q["expect"]}
            row = {"kind": q["kind"], "half": q["half"], "query": q["query"], "modes": {}}
            embedder.embed_query(q["query"])  # encoded once before timing (the query cache), as in LoCoMo
            for mode in MODES:
                t0 = time.perf_counter()
                if mode == "plain":
                    got = list(dict.fromkeys(plain.search(q["query"], LIMIT)))  # merged memories: one id
                    hits = []
                else:
                    hits = eng.recall(q["query"], limit=LIMIT, reinforce=False, **MODE_KWARGS[mode])
                    got = [h.memory.id for h in hits]
                ms = (time.perf_counter() - t0) * 1000
                row["modes"][mode] = {
                    "n": len(got),
                    "ms": ms,
                    "hit@1": float(bool(want & set(got[:1]))),
                    "hit@3": float(bool(want & set(got[:3]))),
                    "relevant": [g in want for g in got],
                    "strong": [h.confidence == "strong" for h in hits] or [False] * len(got),
                }
            rows.append(row)
        # The none queries once more, as an agent asks them (reinforcement on).
        before = _recall_total(eng)
        returned = sum(len(eng.recall(q["query"], limit=LIMIT)) for q in doc["queries"] if q["kind"] == "none")
        reinforced = _recall_total(eng) - before
    finally:
        eng.close()
    return {
        "rows": rows,
        "actions": dict(actions),
        "memories": len(doc["memories"]),
        "none_recall_returned": returned,
        "none_recall_reinforced": reinforced,
        "table": score_rows(rows),
        "recall_ms": latency(rows),
    }


def latency(rows: list[dict]) -> dict[str, dict[str, float | None]]:
    """Recall's p50 / p95 in ms per mode over every query (encoding excluded)."""
    from .locomo.metrics import percentile

    return {
        m: {
            "p50": percentile([r["modes"][m]["ms"] for r in rows], 50),
            "p95": percentile([r["modes"][m]["ms"] for r in rows], 95),
        }
        for m in MODES
    }


def _recall_total(eng) -> int:
    return int(eng.store_db.execute("SELECT coalesce(sum(recall_count), 0) FROM memories").fetchone()[0])


def score_rows(rows: list[dict]) -> dict:
    """{half: {kind: {"n": n, mode: {"hit@1", "hit@3", "precision", "unrelated"}}}}; for `none`,
    hit = returned nothing and "returned" the mean number of memories returned."""
    out: dict = {}
    for half in HALVES:
        out[half] = {}
        for kind in KINDS:
            sel = [r for r in rows if r["kind"] == kind and (half == "all" or r["half"] == half)]
            if not sel:
                continue
            cell: dict[str, Any] = {"n": len(sel)}
            for mode in MODES:
                p = precision((r["kind"], r["modes"][mode]["relevant"]) for r in sel)
                if kind == "none":
                    v = p["none_empty"]
                    cell[mode] = {
                        "hit@1": v,
                        "hit@3": v,
                        "returned": p["none_returned"],
                        "no_strong": sum(not any(r["modes"][mode]["strong"]) for r in sel) / len(sel),
                    }
                else:
                    cell[mode] = {k: sum(r["modes"][mode][k] for r in sel) / len(sel) for k in ("hit@1", "hit@3")}
                    cell[mode].update(precision=p["precision"], unrelated=p["unrelated"], strong3=strong3(sel, mode))
            out[half][kind] = cell
        # Every answered kind together: the precision an agent meets over its ordinary questions.
        sel = [r for r in rows if r["kind"] != "none" and (half == "all" or r["half"] == half)]
        if sel:
            cell = {"n": len(sel)}
            for mode in MODES:
                p = precision((r["kind"], r["modes"][mode]["relevant"]) for r in sel)
                cell[mode] = {
                    "hit@1": sum(r["modes"][mode]["hit@1"] for r in sel) / len(sel),
                    "hit@3": sum(r["modes"][mode]["hit@3"] for r in sel) / len(sel),
                    "precision": p["precision"],
                    "unrelated": p["unrelated"],
                    "strong3": strong3(sel, mode),
                }
            out[half]["answered"] = cell
    return out


def strong3(rows: list[dict], mode: str) -> float:
    """The share of answered queries with a memory marked strong and labelled relevant in the top 3."""
    return sum(
        any(rel and st for rel, st in zip(r["modes"][mode]["relevant"][:3], r["modes"][mode]["strong"][:3]))
        for r in rows
    ) / len(rows)


def run_heldout(path: str | Path, settings=None) -> dict[str, dict]:
    """The held-out set through a real stdio MCP server (benchmarks.agent_mcp), once with the
    second stages off (every mode) and once on (hybrid, the only mode they reorder), each in its
    own ENGRAM_HOME: a daemon reads its settings when it starts. "On" is the second stages the
    run's `settings` turn on (late interaction, the cross-encoder), the cross-encoder when neither."""
    import tempfile

    import anyio

    from . import agent_mcp

    data = agent_mcp.load_set(path)
    out = {}
    late = bool(settings is not None and settings.late_interaction)
    rerank = not late or bool(settings.rerank)
    second = {"ENGRAM_RERANK": str(int(rerank)), "ENGRAM_LATE_INTERACTION": str(int(late))}
    for label, env, modes in (
        ("first", {"ENGRAM_RERANK": "0", "ENGRAM_LATE_INTERACTION": "0"}, agent_mcp.MODES),
        ("reranked", second, ("hybrid",)),
    ):
        with tempfile.TemporaryDirectory(prefix="engram-recall-eval-") as tmp:
            try:
                out[label] = anyio.run(agent_mcp.run_set, data, Path(tmp), modes, env)
            finally:
                agent_mcp.stop_engram_daemon(Path(tmp))
    return out


def summary(agent: dict, heldout: dict | None, locomo: dict | None, reranked: bool) -> list[str]:
    """Issue 27's table: each set with the first stage alone and with the reranker, side by side."""
    on = "second stage" if reranked else "second stage (ENGRAM_RERANK, ENGRAM_LATE_INTERACTION off: the first stage)"
    lines = ["| set | figure | first stage | " + on + " |", "|---|---|---:|---:|"]

    def row(label: str, figure: str, a: float, b: float, fmt: str = "{:.3f}") -> None:
        lines.append(f"| {label} | {figure} | {fmt.format(a)} | {fmt.format(b)} |")

    for half in ("tune", "report"):
        t = agent["table"][half]
        for kind, cell in t.items():
            if kind == "none":
                continue
            f, r = cell["hybrid_first"], cell["hybrid"]
            lines.append(
                f"| agent {half}, {kind} ({cell['n']}) | Hit@1 / Hit@3 / strong@3 | "
                f"{f['hit@1']:.3f} / {f['hit@3']:.3f} / {f['strong3']:.3f} | "
                f"{r['hit@1']:.3f} / {r['hit@3']:.3f} / {r['strong3']:.3f} |"
            )
        if "none" in t:
            n = t["none"]
            row(
                f"agent {half}, none ({n['n']})",
                "no strong hit",
                n["hybrid_first"]["no_strong"],
                n["hybrid"]["no_strong"],
            )
    if heldout:
        f, r = heldout["first"]["modes"]["hybrid"], heldout["reranked"]["modes"]["hybrid"]
        for kind in f["kinds"]:
            a, b = f["kinds"][kind], r["kinds"][kind]
            lines.append(
                f"| held-out (MCP), {kind} ({a['n']}) | Hit@1 / Hit@3 / strong@3 | "
                f"{a['hit1']:.2f} / {a['hit3']:.2f} / {a['strong3']:.2f} | "
                f"{b['hit1']:.2f} / {b['hit3']:.2f} / {b['strong3']:.2f} |"
            )
        lines.append(
            f"| held-out (MCP), answered ({f['answered']['n']}) | Hit@3 / strong@3 | "
            f"{f['answered']['hit3']:.2f} / {f['answered']['strong3']:.2f} | "
            f"{r['answered']['hit3']:.2f} / {r['answered']['strong3']:.2f} |"
        )
        row(
            f"held-out (MCP), none ({f['none']['n']})",
            "no strong hit",
            f["none"]["no_strong"],
            r["none"]["no_strong"],
            "{:.2f}",
        )
    ms = agent["recall_ms"]
    lines.append(
        f"| agent set, recall at limit {LIMIT} | p50 / p95 ms | {ms['hybrid_first']['p50']:.1f} / "
        f"{ms['hybrid_first']['p95']:.1f} | {ms['hybrid']['p50']:.1f} / {ms['hybrid']['p95']:.1f} |"
    )
    if locomo is not None:
        f, r = locomo["by_mode"]["hybrid_first"]["overall_1_4"], locomo["by_mode"]["hybrid"]["overall_1_4"]
        for k in ("hit@1", "hit@5", "recall_acc@10", "mrr"):
            row("LoCoMo, all ten conversations", k, f[k], r[k])
        t = locomo["timing"]["recall_ms"]
        lines.append(
            f"| LoCoMo, recall at limit 10 | p50 / p95 ms | {t['hybrid_first']['p50']:.1f} / "
            f"{t['hybrid_first']['p95']:.1f} | {t['hybrid']['p50']:.1f} / {t['hybrid']['p95']:.1f} |"
        )
    return lines


def markdown(
    agent: dict,
    locomo: dict | None,
    command: str,
    seconds: float,
    heldout: dict | None = None,
    reranked: bool = False,
    long: dict | None = None,
) -> str:
    lines = [f"Command: `{command}` ({datetime.now(timezone.utc):%Y-%m-%d}, {seconds:.0f} s).", ""]
    lines += [
        "Hybrid recall with the first stage alone and with the reranker (Hit@k, strong@3: a "
        "right answer marked strong in the top 3; latency without encoding the query):",
        "",
    ]
    lines += summary(agent, heldout, locomo, reranked) + [""]
    lines.append(
        f"Agent set: {agent['memories']} memories stored in one session "
        f"(actions {json.dumps(agent['actions'], sort_keys=True)}), limit {LIMIT}. Per kind "
        "Hit@1 / Hit@3 / precision / unrelated memories returned per query / share with a "
        "strong right answer in the top 3; for `none`, the fraction of queries that returned "
        "no memory / memories returned per query / fraction with no strong memory."
    )
    for half in HALVES:
        lines += [
            "",
            f"**{half} half**" if half != "all" else "**both halves**",
            "",
            "| kind | n | " + " | ".join(MODES) + " |",
            "|---|---:|" + "---|" * len(MODES),
        ]
        for kind, cell in agent["table"][half].items():
            vals = []
            for mode in MODES:
                c = cell[mode]
                vals.append(
                    f"{c['hit@1']:.3f} / {c['returned']:.2f} / {c['no_strong']:.3f}"
                    if kind == "none"
                    else f"{c['hit@1']:.3f} / {c['hit@3']:.3f} / {c['precision']:.2f} / "
                    f"{c['unrelated']:.2f} / {c['strong3']:.3f}"
                )
            lines.append(f"| {kind} | {cell['n']} | " + " | ".join(vals) + " |")
    lines += [
        "",
        f"`none` queries asked again with reinforcement on (limit {LIMIT}): "
        f"{agent['none_recall_returned']} memories returned, "
        f"{agent['none_recall_reinforced']} recall counts grew.",
    ]
    if long is not None:
        from .long_sessions import markdown as long_markdown

        lines += ["", long_markdown(long).rstrip("\n")]
    if locomo is not None:
        lines += [
            "",
            "LoCoMo, all ten conversations, categories 1-4:",
            "",
            "| mode | hit@1 | hit@5 | hit@10 | recall_acc@5 | recall_acc@10 | mrr |",
            "|---|---:|---:|---:|---:|---:|---:|",
        ]
        for mode, r in locomo["by_mode"].items():
            o = r["overall_1_4"]
            lines.append(
                f"| {mode} | "
                + " | ".join(
                    f"{o[k]:.3f}" for k in ("hit@1", "hit@5", "hit@10", "recall_acc@5", "recall_acc@10", "mrr")
                )
                + " |"
            )
        t = locomo["timing"]
        lines += [
            "",
            f"LoCoMo ingest {t['ingest_memories_per_s']:.0f} memories/s; hybrid recall "
            f"p50 {t['recall_ms']['hybrid']['p50']:.1f} ms, p95 {t['recall_ms']['hybrid']['p95']:.1f} ms "
            f"(encoding excluded); bm25 p50 {t['recall_ms']['bm25']['p50']:.1f} ms.",
        ]
    if heldout:
        from .agent_mcp import markdown as heldout_markdown

        for label, title in (("first", "reranker off"), ("reranked", "reranker on")):
            lines += ["", f"Held-out set through MCP, {title} (limit 5):", "", heldout_markdown(heldout[label])]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.recall_eval", description=__doc__.split("\n")[0])
    ap.add_argument("--agent-set", default=str(default_set_path()), help="labelled agent-memory set")
    ap.add_argument("--locomo-data", default=None, help="locomo10.json (default ../shared/locomo)")
    ap.add_argument("--no-locomo", action="store_true", help="only the agent set (for tuning)")
    ap.add_argument(
        "--heldout",
        default=str(Path(__file__).resolve().parent.parent / "tests" / "data" / "agent_heldout.json"),
        help="held-out set asked through MCP with the reranker off and on",
    )
    ap.add_argument("--no-heldout", action="store_true", help="skip the held-out set")
    ap.add_argument("--long-set", default=None, help="long-session set (default tests/data/long_sessions.json)")
    ap.add_argument(
        "--embed-cache", default=None, help="LoCoMo content-hash embedding cache (faster reruns; not for reported runs)"
    )
    ap.add_argument("--model", default=None, help="embedding model (default ENGRAM_MODEL)")
    ap.add_argument("--out", default=None, help="write the markdown table here")
    ap.add_argument("--json", default=None, help="write the full result (per query) here")
    args = ap.parse_args(argv)

    from engram import Settings
    from engram.models.embedding import load_embedder

    started = time.perf_counter()
    settings = Settings.from_env(model=args.model) if args.model else Settings.from_env()
    embedder = load_embedder(settings.model, cache_dir=settings.model_cache, threads=settings.torch_threads)
    agent = run_agent_set(load_set(Path(args.agent_set)), settings, embedder)
    heldout = None if args.no_heldout else run_heldout(args.heldout, settings)
    from . import long_sessions

    long = long_sessions.run_long_sessions(
        long_sessions.load_set(Path(args.long_set) if args.long_set else long_sessions.default_set_path()),
        settings,
        embedder,
    )
    locomo = None
    if not args.no_locomo:
        from .locomo.run import run as run_locomo

        locomo = run_locomo(
            args.locomo_data,
            modes=MODES,
            settings=settings,
            embedder=embedder,
            progress=False,
            embed_cache=args.embed_cache,
        )
    command = "python -m benchmarks.recall_eval " + " ".join(argv if argv is not None else sys.argv[1:])
    if args.json:  # first: a long run's figures outlive a failure in the table below
        Path(args.json).write_text(
            json.dumps(
                {
                    "agent": agent,
                    "heldout": heldout,
                    "long_sessions": long,
                    "locomo": locomo,
                    "rerank": settings.rerank,
                    "late_interaction": settings.late_interaction,
                },
                indent=1,
                ensure_ascii=False,
                default=str,
            ),
            encoding="utf-8",
        )
    md = markdown(
        agent,
        locomo,
        command.strip(),
        time.perf_counter() - started,
        heldout,
        settings.rerank or settings.late_interaction,
        long,
    )
    print(md)
    if args.out:
        Path(args.out).write_text(md, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
