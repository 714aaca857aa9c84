"""LoCoMo harness: evidence normalisation, dates, metrics, the loader on the real file, end-to-end runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path

import httpx
import pytest

from benchmarks.locomo import answer, metrics
from benchmarks.locomo.data import (
    Question,
    Turn,
    load,
    normalize_dia_id,
    normalize_evidence,
    parse_date,
)
from benchmarks.locomo.run import default_data_path, render_markdown, run

REPO = Path(__file__).resolve().parents[2]
DATA = REPO.parent / "shared" / "locomo" / "locomo10.json"
needs_data = pytest.mark.skipif(
    not DATA.exists(), reason=f"LoCoMo data (CC BY-NC, kept outside the repo) not found at {DATA}"
)


# --- evidence normalisation -------------------------------------------------------------------


def test_clean_ids_pass_through():
    assert normalize_evidence(["D1:3", "D12:40"]) == ("D1:3", "D12:40")


def test_semicolon_separated_ids_are_split():
    assert normalize_evidence(["D8:6; D9:17"]) == ("D8:6", "D9:17")


def test_space_separated_ids_are_split():
    assert normalize_evidence(["D9:1 D4:4 D4:6"]) == ("D9:1", "D4:4", "D4:6")


def test_stray_colon_is_removed():
    assert normalize_evidence(["D:11:26"]) == ("D11:26",)


def test_leading_zero_is_dropped():
    assert normalize_evidence(["D30:05"]) == ("D30:5",)


def test_bare_d_is_dropped_and_others_kept():
    assert normalize_evidence(["D1:18", "D", "D1:20"]) == ("D1:18", "D1:20")
    assert normalize_evidence(["D"]) == ()


def test_duplicates_collapse_in_order():
    assert normalize_evidence(["D2:1", "D2:01", "D1:1 D2:1"]) == ("D2:1", "D1:1")


def test_non_ids_are_not_ids():
    assert normalize_dia_id("S3") is None
    assert normalize_dia_id("D3") is None
    assert normalize_dia_id(" D3:4 ") == "D3:4"


# --- dates ------------------------------------------------------------------------------------


def test_parse_date_afternoon():
    assert parse_date("1:56 pm on 8 May, 2023") == datetime(2023, 5, 8, 13, 56, tzinfo=timezone.utc)


def test_parse_date_morning_and_noon_midnight():
    assert parse_date("10:04 am on 19 December, 2023") == datetime(2023, 12, 19, 10, 4, tzinfo=timezone.utc)
    assert parse_date("12:09 am on 13 September, 2023").hour == 0
    assert parse_date("12:30 pm on 1 January, 2022").hour == 12


def test_parse_date_rejects_other_formats():
    for bad in ("2023-05-08", "1:56 pm on 8 Mayo, 2023", "13:56 pm on 8 May, 2023"):
        with pytest.raises(ValueError):
            parse_date(bad)


def test_turn_content_carries_image_caption():
    when = datetime(2023, 5, 8, tzinfo=timezone.utc)
    plain = Turn("D1:1", "Caroline", "Hi!", None, when, 1)
    pic = Turn("D1:2", "Melanie", "Look.", "a photo of a lake", when, 1)
    assert plain.content == "Caroline: Hi!"
    assert pic.content == "Melanie: Look. [shared image: a photo of a lake]"


# --- metrics ----------------------------------------------------------------------------------

RANKED = [{"D1:1"}, {"D2:2", "D3:3"}, {"D4:4"}, {"D5:5"}, {"D6:6"}, {"D7:7"}]


def test_hit_at_k():
    assert metrics.hit_at(RANKED, ["D3:3"], 1) == 0.0
    assert metrics.hit_at(RANKED, ["D3:3"], 2) == 1.0
    assert metrics.hit_at(RANKED, ["D7:7"], 5) == 0.0
    assert metrics.hit_at(RANKED, ["D7:7"], 10) == 1.0
    assert metrics.hit_at([], ["D1:1"], 10) == 0.0


def test_recall_acc_counts_each_evidence_id_once():
    # A merged memory carrying two evidence ids finds both.
    assert metrics.recall_acc_at(RANKED, ["D2:2", "D3:3"], 2) == 1.0
    assert metrics.recall_acc_at(RANKED, ["D1:1", "D7:7", "D9:9"], 5) == pytest.approx(1 / 3)
    assert metrics.recall_acc_at(RANKED, ["D1:1", "D7:7", "D9:9"], 10) == pytest.approx(2 / 3)
    with pytest.raises(ValueError):
        metrics.recall_acc_at(RANKED, [], 5)


def test_reciprocal_rank():
    assert metrics.reciprocal_rank(RANKED, ["D4:4", "D6:6"]) == pytest.approx(1 / 3)
    assert metrics.reciprocal_rank(RANKED, ["D1:1"]) == 1.0
    assert metrics.reciprocal_rank(RANKED, ["D9:9"]) == 0.0
    eleven = [{f"D1:{i}"} for i in range(1, 12)]
    assert metrics.reciprocal_rank(eleven, ["D1:11"]) == 0.0  # beyond the top 10
    assert metrics.reciprocal_rank(eleven, ["D1:10"]) == pytest.approx(0.1)


def test_aggregate_by_category_and_overall_excludes_5():
    scores = [
        metrics.score_question(RANKED, ["D1:1"], 1),  # all 1.0
        metrics.score_question(RANKED, ["D9:9"], 4),  # all 0.0
        metrics.score_question(RANKED, ["D1:1"], 5),  # adversarial: not in overall
    ]
    agg = metrics.aggregate(scores, {1: "a", 2: "b", 4: "d", 5: "e"}, (1, 2, 3, 4))
    assert agg["overall"]["n"] == 2
    assert agg["overall"]["hit@1"] == 0.5
    assert agg["overall"]["mrr"] == 0.5
    assert set(agg["by_category"]) == {"1", "4", "5"}  # category 2 had no questions
    assert agg["by_category"]["5"]["hit@10"] == 1.0
    assert agg["by_category"]["4"]["recall_acc@10"] == 0.0


def test_percentile_matches_linear_interpolation():
    assert metrics.percentile([], 50) is None
    assert metrics.percentile([5.0], 95) == 5.0
    assert metrics.percentile([1, 2, 3, 4], 50) == 2.5
    assert metrics.percentile([10, 0, 20, 30, 40], 95) == pytest.approx(38.0)
    with pytest.raises(ValueError):
        metrics.percentile([1], 101)


# --- answer scoring (no network) --------------------------------------------------------------


def _q(category: int, ans: str | None = "x", adv: str | None = None) -> Question:
    return Question(0, 0, "Did she go?", ans, adv, category, ("D1:1",), ("D1:1",))


def test_answer_normalisation_and_f1():
    assert answer.normalize_answer("The Cat, and a Dog!") == "cat dog"
    assert answer.f1_score("7 May 2023", "7 May, 2023") == 1.0
    assert answer.f1_score("painting", "paintings") == 1.0  # stemmed
    assert answer.f1_score("blue car", "red car") == pytest.approx(0.5)
    assert answer.f1_score("nothing", "something else") == 0.0


def test_answer_scoring_rules_per_category():
    assert answer.score_answer("psychology", _q(3, "Psychology; counseling")) == 1.0
    assert answer.score_answer("pottery, camping", _q(1, "pottery, camping, painting")) == pytest.approx(2 / 3)
    assert answer.score_answer("Not mentioned in the conversation", _q(5, None, "yes")) == 1.0
    assert answer.score_answer("yes", _q(5, None, "yes")) == 0.0


def test_adversarial_choice_maps_letters_to_options():
    prompt, options = answer.build_prompt(_q(5, None, "Sweden"), ("A", "B"), ())
    assert options is not None and answer.NOT_MENTIONED in options and "Sweden" in options
    picked = answer.resolve_choice("(a)", options)
    assert picked == options[0]
    assert f"(a) {options[0]} (b) {options[1]}" in prompt


def test_answer_stage_skips_without_key():
    endpoint, reason = answer.endpoint_from_env({})
    assert endpoint is None and reason == "answer stage skipped: no ENGRAM_BENCH_API_KEY"
    endpoint, reason = answer.endpoint_from_env({"ENGRAM_BENCH_API_KEY": "k"})
    assert endpoint is None and "ENGRAM_BENCH_BASE_URL" in reason


def test_answer_stage_request_and_scoring_over_http():
    # An OpenAI-compatible endpoint cannot run here; httpx's transport hook stands in for it.
    seen = []

    def handler(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        seen.append((str(request.url), request.headers["authorization"], body))
        return httpx.Response(200, json={"choices": [{"message": {"content": "7 May 2023"}}]})

    ep = answer.Endpoint("http://bench.invalid/v1", "m", "secret")
    when = datetime(2023, 5, 8, 13, 56, tzinfo=timezone.utc)
    items = [
        answer.AnswerItem(_q(2, "7 May 2023"), ("A", "B"), (answer.ContextItem(when, "A: hi"),)),
        answer.AnswerItem(_q(5, None, "yes"), ("A", "B"), ()),
    ]
    with httpx.Client(transport=httpx.MockTransport(handler)) as client:
        out = answer.run_answers(items, ep, client=client)
    assert seen[0][0] == "http://bench.invalid/v1/chat/completions"
    assert seen[0][1] == "Bearer secret"
    assert "1:56 pm on 8 May, 2023: A: hi" in seen[0][2]["messages"][0]["content"]
    assert out["by_category"]["2"]["f1"] == 1.0
    assert out["by_category"]["5"]["accuracy"] == 0.0
    assert out["overall_1_4"] == {"f1": 1.0, "n": 1}


# --- the real file ----------------------------------------------------------------------------


@needs_data
def test_loader_counts_match_the_readme():
    convs = load(DATA)
    assert len(convs) == 10
    assert sum(len(c.turns) for c in convs) == 5882
    questions = [q for c in convs for q in c.questions]
    assert len(questions) == 1986
    assert Counter(q.category for q in questions) == {1: 282, 2: 321, 3: 96, 4: 841, 5: 446}
    assert sum(1 for q in questions if q.category in (1, 2, 3, 4) and q.evidence) == 1536
    without = [q for q in questions if not q.evidence]
    assert len(without) == 4 and {q.category for q in without} == {3}


@needs_data
def test_loader_turns_are_dated_and_normalised():
    convs = load(DATA)
    first = convs[0].sessions[0]
    assert first.when == datetime(2023, 5, 8, 13, 56, tzinfo=timezone.utc)
    assert first.turns[0].dia_id == "D1:1" and first.turns[0].speaker == "Caroline"
    # Sessions come in numeric order (session_10 after session_9), each dated.
    for c in convs:
        numbers = [s.number for s in c.sessions]
        assert numbers == sorted(numbers)
    every = [e for c in convs for q in c.questions for e in q.evidence]
    assert all(normalize_dia_id(e) == e for e in every)
    assert "D30:5" in [e for q in convs[9].questions for e in q.evidence]


def test_default_data_path_is_beside_the_repo():
    assert default_data_path() == DATA


# --- end to end through the engine ------------------------------------------------------------


def _check_block(block: dict) -> None:
    for key in metrics.METRIC_KEYS:
        assert 0.0 <= block[key] <= 1.0, (key, block[key])
    assert block["n"] > 0


@needs_data
def test_run_small_slice_through_the_engine(settings, fake):
    result = run(
        data_path=DATA,
        conversations=[0],
        limit=5,
        modes=["bm25", "hybrid"],
        settings=settings,
        embedder=fake,
        progress=False,
    )
    assert result["default_mode"] == "hybrid"
    assert set(result["by_mode"]) == {"bm25", "hybrid"}
    assert result["overall_1_4"] == result["by_mode"]["hybrid"]["overall_1_4"]
    _check_block(result["overall_1_4"])
    for mode in result["by_mode"].values():
        _check_block(mode["overall_1_4"])
        for cat in mode["by_category"].values():
            _check_block(cat)
    # The first five questions of conversation 0 all have evidence and are in categories 1-4.
    assert result["questions_asked"] == 5
    assert result["overall_1_4"]["n"] + result["no_evidence"] == 5
    assert result["ingest"]["turns"] == 419
    assert sum(result["ingest"]["actions"].values()) == 419
    assert result["settings"]["reinforce"] is False
    assert result["settings"]["conversations"] == [0]
    assert result["timing"]["recall_ms"]["bm25"]["n"] == 5
    e2e = result["timing"]["query_end_to_end_ms"]
    assert e2e["mode"] == "hybrid" and e2e["p50"] >= result["timing"]["recall_ms"]["hybrid"]["p50"]
    assert result["timing"]["ingest_memories_per_s"] > 0
    assert result["data_sha256"] == "79fa87e90f04081343b8c8debecb80a9a6842b76a7aa537dc9fdf651ea698ff4"
    assert "answer" not in result
    json.dumps(result)  # the document must be plain JSON
    table = render_markdown(result)
    assert "| hybrid |" in table and "| bm25 |" in table


@needs_data
def test_the_plain_baseline_runs_beside_the_engine_on_the_same_turns(settings, fake):
    result = run(
        data_path=DATA,
        conversations=[0],
        limit=5,
        modes=["hybrid", "plain"],
        settings=settings,
        embedder=fake,
        progress=False,
    )
    assert set(result["by_mode"]) == {"hybrid", "plain"}
    _check_block(result["by_mode"]["plain"]["overall_1_4"])
    assert result["timing"]["recall_ms"]["plain"]["n"] == 5
    assert result["overall_1_4"] == result["by_mode"]["hybrid"]["overall_1_4"]


@needs_data
@pytest.mark.model
def test_cli_subprocess_with_real_model(tmp_path):
    out, md = tmp_path / "locomo.json", tmp_path / "locomo.md"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "ENGRAM_HOME": str(tmp_path / "home")}
    env.pop("ENGRAM_BENCH_API_KEY", None)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks.locomo",
            "--conversations",
            "0",
            "--limit",
            "5",
            "--out",
            str(out),
            "--markdown",
            str(md),
            "--answer",
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    result = json.loads(out.read_text())
    assert result["settings"]["modes"] == ["bm25", "vector", "hybrid", "hybrid_nograph", "plain"]
    assert result["settings"]["model"] == "all-MiniLM-L6-v2"
    _check_block(result["overall_1_4"])
    assert result["answer"] == {"skipped": "answer stage skipped: no ENGRAM_BENCH_API_KEY"}
    assert "answer stage skipped: no ENGRAM_BENCH_API_KEY" in proc.stdout
    assert md.read_text() in proc.stdout
