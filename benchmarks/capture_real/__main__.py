"""Capture on real sessions: recorded transcripts of other people's work replayed through `engram hook`
turn by turn, as their clients would have run the hooks, and what the store then holds scored
against labels written by reading each session (benchmarks/capture_real/labels, schema in LABELS.md).

    python -m benchmarks.capture_real --corpus ../corpus --half report [--only ID ...] [--out DIR]

The transcripts are not in this repository (their licences vary and some hold real credentials):
`--corpus` is a folder with `manifest.json` (id, file, client, repo), `split.json` (tune/report ids)
and the files; sources.json here lists where each one was found. Each repository gets a store of its
own, its sessions replayed in order into it, so a later session meets what an earlier one left.

Scored, per half: conventions (memories tagged `convention`, candidates apart) and pitfalls
(memories of type failure tagged `pitfall`) as precision and recall against the labels; episodes
holding a client's own message as the user's request, or an empty / "No response requested."
answer; chunks of long texts that start in the middle of a word; hook runs that failed or logged an
error; time per transcript and the store's growth. `--out` keeps, per session, what was stored and
what each prompt was given (injections.jsonl), for reading.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from benchmarks.capture_real.replay import CLIENT_TEXT, ENGRAM, READERS, hook_env, replay

HERE = Path(__file__).resolve().parent
LABELS = HERE / "labels"
CANDIDATE_TAGS = {"candidate", "convention-candidate"}  # a convention held until confirmed: not injected
NO_ANSWER = {"", "no response requested."}
WORD = re.compile(r"\w")


def _export(home: Path, env: dict) -> list[dict]:
    path = home / "capture-real-export.jsonl"
    p = subprocess.run([str(ENGRAM), "export", str(path)], env=env, capture_output=True, timeout=600)
    if p.returncode != 0:
        raise RuntimeError(f"export failed: {p.stderr.decode(errors='replace')[-400:]}")
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    path.unlink()
    return [r for r in rows if r.get("kind") == "memory"]


def _stop(env: dict) -> None:
    subprocess.run([str(ENGRAM), "stop"], env=env, capture_output=True, timeout=120)


def _store_bytes(home: Path) -> int:
    return sum(p.stat().st_size for p in home.glob("*.duckdb*") if p.is_file())


def _matches(patterns: list[str], text: str) -> bool:
    try:
        return bool(patterns) and all(re.search(p, text, re.I | re.S) for p in patterns)
    except re.error:
        return False


def _memory_text(m: dict) -> str:
    return m.get("content", "") + "\n" + json.dumps(m.get("metadata") or {}, ensure_ascii=False)


def _is_convention(m: dict) -> bool:
    return "convention" in (m.get("tags") or []) and m.get("status", "active") == "active"


def _is_candidate(m: dict) -> bool:
    return bool(CANDIDATE_TAGS & set(m.get("tags") or []))


def _is_pitfall(m: dict) -> bool:
    return m.get("memory_type") == "failure" and "pitfall" in (m.get("tags") or [])


def _names_a_file(m: dict, files: list[str]) -> bool:
    """An edit fix is right only where it touched a file the label names (by its last parts)."""
    text = _memory_text(m)
    return any(Path(f).name and Path(f).name in text for f in files)


def credits(fix: dict, m: dict) -> bool:
    """Whether the stored pitfall `m` is the labelled pair `fix`: its patterns match, and an edit
    fix names a file the label says was edited."""
    if not _matches(fix.get("match") or [], _memory_text(m)):
        return False
    return fix.get("fixed_by") != "edit" or not fix.get("files") or _names_a_file(m, fix["files"])


def _chunk_groups(memories: list[dict]) -> dict[str, list[dict]]:
    groups: dict[str, list[dict]] = defaultdict(list)
    for m in memories:
        meta = m.get("metadata") or {}
        if meta.get("chunk_group") and isinstance(meta.get("chunk_start"), int):
            groups[meta["chunk_group"]].append(m)
    return groups


def _whole_text(chunks: list[dict]) -> str:
    """The long text the chunks were cut from: each is a verbatim slice of it, starting at its
    `chunk_start` (engram.engine.writes)."""
    text: list[str] = []
    for m in sorted(chunks, key=lambda m: m["metadata"]["chunk_start"]):
        text[m["metadata"]["chunk_start"] :] = m["content"]
    return "".join(text)


def _mid_word_starts(memories: list[dict]) -> list[str]:
    """Chunks of one long text that begin in the middle of a word."""
    bad = []
    for chunks in _chunk_groups(memories).values():
        whole = _whole_text(chunks)
        for m in chunks:
            at = m["metadata"]["chunk_start"]
            if at > 0 and WORD.match(whole[at - 1]) and WORD.match(whole[at]):
                bad.append(m["content"][:60])
    return bad


def _whole_episodes(memories: list[dict]) -> list[dict]:
    """The episodes as they were stored, a long one put back together from its chunks."""
    out = [
        m for m in memories if m.get("memory_type") == "episode" and not (m.get("metadata") or {}).get("chunk_group")
    ]
    for chunks in _chunk_groups(memories).values():
        if chunks[0].get("memory_type") == "episode":
            out.append({**chunks[0], "content": _whole_text(chunks), "metadata": {}})
    return out


def _episode_parts(m: dict) -> tuple[str, str] | None:
    """(request, answer) of a whole episode (_whole_episodes)."""
    if m.get("memory_type") != "episode":
        return None
    content = m.get("content", "")
    if not content.startswith("User:"):
        return None
    request, _, answer = content.removeprefix("User:").partition("\nAssistant:")
    return request.strip(), answer.strip()


def _client_request(m: dict, client_messages: list[str]) -> bool:
    parts = _episode_parts(m)
    if parts is None:
        return False
    heads = [c.rstrip("…. ").strip()[:40] for c in client_messages if c.strip()]
    return parts[0].startswith(CLIENT_TEXT) or any(h and parts[0].startswith(h) for h in heads)


def _no_answer(m: dict) -> bool:
    parts = _episode_parts(m)
    return parts is not None and parts[1].lower().rstrip(".") in {a.rstrip(".") for a in NO_ANSWER}


def score_session(label: dict, memories: list[dict]) -> dict:
    """What one session's capture got right and wrong, by its label."""
    mine = memories
    conventions = [m for m in mine if _is_convention(m)]
    kept = [m for m in conventions if not _is_candidate(m)]
    pitfalls = [m for m in mine if _is_pitfall(m)]
    out = {"id": label["id"], "client": label["client"]}

    wanted = label.get("conventions") or []
    right_kept = [m for m in kept if any(_matches(c.get("match") or [], m["content"]) for c in wanted)]
    out["conventions"] = {
        "stored": len(kept),
        "candidates": len(conventions) - len(kept),
        "right": len(right_kept),
        "labelled": len(wanted),
        "found": sum(1 for c in wanted if any(_matches(c.get("match") or [], m["content"]) for m in kept)),
        "found_with_candidates": sum(
            1 for c in wanted if any(_matches(c.get("match") or [], m["content"]) for m in conventions)
        ),
        "wrong": [m["content"][:200] for m in kept if m not in right_kept],
    }

    fixes = label.get("fixes") or []
    right_pitfalls = [m for m in pitfalls if any(credits(f, m) for f in fixes)]
    by_origin = defaultdict(lambda: [0, 0])
    for f in fixes:
        hit = any(credits(f, m) for m in pitfalls)
        by_origin[f.get("origin", "agent-run")][0] += hit
        by_origin[f.get("origin", "agent-run")][1] += 1
    out["pitfalls"] = {
        "stored": len(pitfalls),
        "right": len(right_pitfalls),
        "labelled": len(fixes),
        "found": sum(v[0] for v in by_origin.values()),
        "by_origin": {k: {"found": v[0], "labelled": v[1]} for k, v in by_origin.items()},
        "wrong": [m["content"][:200] for m in pitfalls if m not in right_pitfalls],
    }
    episodes = _whole_episodes(mine)
    out["episodes"] = {
        "stored": len(episodes),
        "client_requests": [
            m["content"][:120] for m in episodes if _client_request(m, label.get("client_messages") or [])
        ],
        "no_answer": sum(1 for m in episodes if _no_answer(m)),
    }
    out["mid_word_chunks"] = _mid_word_starts(mine)
    return out


def _ratio(a: int, b: int) -> float | None:
    return round(a / b, 3) if b else None


def pitfall_summary(scores: list[dict]) -> dict:
    """Pitfall precision and recall over the sessions' scores, all, by origin and for Codex
    sessions (the replay's summary and the offline scorer's)."""
    p = {k: sum(s["pitfalls"][k] for s in scores) for k in ("stored", "right", "labelled", "found")}
    origins: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    codex = [0, 0]
    for s in scores:
        for k, v in s["pitfalls"]["by_origin"].items():
            origins[k][0] += v["found"]
            origins[k][1] += v["labelled"]
        if s["client"] == "codex":
            codex[0] += s["pitfalls"]["found"]
            codex[1] += s["pitfalls"]["labelled"]
    return {
        "pitfall_precision": _ratio(p["right"], p["stored"]),
        "pitfall_recall": _ratio(p["found"], p["labelled"]),
        "pitfalls": p,
        "pitfall_recall_by_origin": {k: _ratio(*v) for k, v in sorted(origins.items())},
        "pitfall_recall_codex": _ratio(*codex),
    }


def summarise(scores: list[dict], runs: list[dict]) -> dict:
    c = {k: sum(s["conventions"][k] for s in scores) for k in ("stored", "candidates", "right", "labelled", "found")}
    c["found_with_candidates"] = sum(s["conventions"]["found_with_candidates"] for s in scores)
    seconds = [r["seconds"] for r in runs]
    turns = sum(r["turns"] for r in runs)
    return {
        "sessions": len(scores),
        "turns": turns,
        "convention_precision": _ratio(c["right"], c["stored"]),
        "convention_recall": _ratio(c["found"], c["labelled"]),
        "convention_recall_with_candidates": _ratio(c["found_with_candidates"], c["labelled"]),
        "conventions": c,
        **pitfall_summary(scores),
        "client_requests": sum(len(s["episodes"]["client_requests"]) for s in scores),
        "no_answer_episodes": sum(s["episodes"]["no_answer"] for s in scores),
        "mid_word_chunks": sum(len(s["mid_word_chunks"]) for s in scores),
        "hook_errors": sum(len(r["errors"]) for r in runs),
        "seconds_per_transcript": round(sum(seconds) / len(seconds), 1) if seconds else None,
        "seconds_per_turn": round(sum(seconds) / turns, 2) if turns else None,
        "memories_per_session": round(sum(r["memories_added"] for r in runs) / len(runs), 1) if runs else None,
        "store_kib_per_session": round(sum(r["store_bytes_added"] for r in runs) / len(runs) / 1024, 1)
        if runs
        else None,
    }


def _label(sid: str, labels: Path = LABELS) -> dict | None:
    path = labels / f"{sid}.json"
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else None


def _select(corpus: Path, half: str, only: list[str], labels: Path) -> tuple[list[dict], list[str]]:
    """The manifest rows to replay (labelled ones of the half, or `only`) and the unlabelled ids."""
    manifest = json.loads((corpus / "manifest.json").read_text(encoding="utf-8"))
    split = json.loads((corpus / "split.json").read_text(encoding="utf-8"))
    ids = set(only) if only else set(split["tune"]) | set(split["report"]) if half == "all" else set(split[half])
    rows = [r for r in manifest if r["id"] in ids]
    unlabelled = [r["id"] for r in rows if _label(r["id"], labels) is None]
    return [r for r in rows if r["id"] not in unlabelled], unlabelled


def _keep_session(d: Path, score: dict, errors: list[str], new: list[dict], injections: list[dict]) -> None:
    d.mkdir(parents=True, exist_ok=True)
    (d / "score.json").write_text(json.dumps(score, indent=1, ensure_ascii=False), encoding="utf-8")
    (d / "errors.txt").write_text("\n".join(errors), encoding="utf-8")
    with (d / "stored.jsonl").open("w", encoding="utf-8") as f:
        for m in new:
            f.write(json.dumps({k: v for k, v in m.items() if k != "embedding"}, ensure_ascii=False) + "\n")
    with (d / "injections.jsonl").open("w", encoding="utf-8") as f:
        for i in injections:
            f.write(json.dumps(i, ensure_ascii=False) + "\n")


def _replay_repo(corpus: Path, scratch: Path, repo: str, sessions: list[dict], labels: Path, out: Path | None):
    """Each session of one repository, in order, into a store of the repository's own."""
    home = scratch / re.sub(r"[^A-Za-z0-9_.-]", "_", repo)
    home.mkdir()
    env = hook_env(home, repo.rsplit("/", 1)[-1])
    seen: set[str] = set()
    scores, runs = [], []
    try:
        for r in sorted(sessions, key=lambda r: r["id"]):
            rec = READERS[r["client"]](corpus / r["file"])
            work = scratch / "work" / r["id"]
            work.mkdir(parents=True)
            size_before = _store_bytes(home)
            rep = replay(rec, env, work, home)
            memories = _export(home, env)
            new = [m for m in memories if m["id"] not in seen]
            seen |= {m["id"] for m in memories}
            s = score_session(_label(r["id"], labels), new)
            scores.append(s)
            runs.append(
                {
                    "id": r["id"],
                    "turns": rep.turns,
                    "seconds": rep.seconds,
                    "errors": rep.errors,
                    "memories_added": len(new),
                    "store_bytes_added": _store_bytes(home) - size_before,
                }
            )
            print(
                f"{r['id']}: {rep.turns} turns in {rep.seconds:.0f}s; conventions "
                f"{s['conventions']['right']}/{s['conventions']['stored']} right, "
                f"{s['conventions']['found']}/{s['conventions']['labelled']} found; pitfalls "
                f"{s['pitfalls']['right']}/{s['pitfalls']['stored']} right, "
                f"{s['pitfalls']['found']}/{s['pitfalls']['labelled']} found; {len(rep.errors)} hook errors",
                file=sys.stderr,
                flush=True,
            )
            if out:
                starts = [{"session_start": c} for c in rep.start_context]
                _keep_session(out / r["id"], s, rep.errors, new, starts + rep.injections)
            shutil.rmtree(work, ignore_errors=True)
    finally:
        _stop(env)
    return scores, runs


def run(
    corpus: Path, half: str, only: list[str], out: Path | None, keep: bool, labels: Path = LABELS, jobs: int = 1
) -> dict:
    rows, unlabelled = _select(corpus, half, only, labels)
    by_repo: dict[str, list[dict]] = defaultdict(list)
    for r in rows:
        by_repo[r["repo"]].append(r)
    # The repository with the most turns first: with several jobs, the longest does not come last.
    order = sorted(by_repo, key=lambda repo: -sum(r.get("user_turns") or 0 for r in by_repo[repo]))
    scores, runs = [], []
    scratch = Path(tempfile.mkdtemp(prefix="capture-real-"))
    try:
        with ThreadPoolExecutor(max_workers=jobs) as pool:
            done = [pool.submit(_replay_repo, corpus, scratch, repo, by_repo[repo], labels, out) for repo in order]
            for f in done:
                s, r = f.result()
                scores += s
                runs += r
    finally:
        if not keep:
            shutil.rmtree(scratch, ignore_errors=True)
    scores.sort(key=lambda s: s["id"])
    return {
        "half": half,
        "unlabelled": unlabelled,
        "summary": summarise(scores, runs),
        "sessions": scores,
        "runs": runs,
    }


def rescore(corpus: Path, half: str, only: list[str], kept: Path, labels: Path = LABELS) -> dict:
    """Score again what an earlier run kept with --out (after a label or a scoring rule changed)."""
    rows, unlabelled = _select(corpus, half, only, labels)
    scores = []
    for r in rows:
        stored = kept / r["id"] / "stored.jsonl"
        if stored.exists():
            lines = stored.read_text(encoding="utf-8").splitlines()
            scores.append(score_session(_label(r["id"], labels), [json.loads(x) for x in lines if x.strip()]))
    return {
        "half": "the sessions named" if only else half,
        "unlabelled": unlabelled,
        "summary": summarise(scores, []),
        "sessions": scores,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.capture_real", description=__doc__.split("\n\n")[0])
    p.add_argument("--corpus", type=Path, required=True, help="folder with manifest.json, split.json, sessions")
    p.add_argument("--half", choices=("tune", "report", "all"), default="tune")
    p.add_argument("--only", nargs="*", default=[], help="session ids (instead of a half)")
    p.add_argument("--out", type=Path, help="keep per-session stores' contents and injections here")
    p.add_argument("--labels", type=Path, default=LABELS, help="label files (default: the committed ones)")
    p.add_argument("--keep", action="store_true", help="keep the scratch stores")
    p.add_argument("--json", type=Path, help="write the full result here")
    p.add_argument("--jobs", type=int, default=1, help="repositories replayed at once (each its own store)")
    p.add_argument("--rescore", type=Path, help="score what an earlier --out kept, without replaying")
    a = p.parse_args(argv)
    started = time.monotonic()
    if a.rescore:
        result = rescore(a.corpus, a.half, a.only, a.rescore, a.labels)
    else:
        result = run(a.corpus, a.half, a.only, a.out, a.keep, a.labels, a.jobs)
    result["seconds"] = round(time.monotonic() - started)
    if a.json:
        a.json.write_text(json.dumps(result, indent=1, ensure_ascii=False), encoding="utf-8")
    print(json.dumps({k: result[k] for k in ("half", "unlabelled", "summary", "seconds")}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
