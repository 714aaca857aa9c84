"""Keeping what capture stored: the user vouches for it, it loses its automatic mark, an episode
becomes a fact; through the operation (Api.call), over HTTP and as the `engram keep` command."""

from __future__ import annotations

import json

import httpx
import pytest

from engram.api import Api
from engram.cli import main
from engram.continuity.conventions import is_captured_convention
from engram.core.errors import NotFound
from engram.core.types import Ctx
from engram.server.http import build_app
from engram.workflows.capture import AUTO_CAPTURE_TAG, prune_episodes
from tests.support.fix_transcripts import captured_fix, cases

PROJECT = "example.com/keep"
CTX = Ctx(session_id="s1", client="claude-code", project=PROJECT)


@pytest.fixture
def api(eng):
    return Api(eng)


def captured(api: Api) -> dict[str, str]:
    """One capture of each kind, stored through the operations the hooks call: {kind: memory id}."""
    fix = captured_fix("claude-code", next(c for c in cases() if c["id"] == "rust-unresolved-import"))
    api.call(
        "session_capture",
        {
            "fixes": [fix.to_dict()],
            "client": "claude-code",
            "episodes": [
                {
                    "request": "Why does the nightly export stall?",
                    "answer": "The exporter waits on a lock the backup job holds.",
                }
            ],
        },
        CTX,
    )
    said = api.call("capture_conventions", {"prompts": ["In this repo we install packages with uv, never pip."]}, CTX)
    assert said["stored"], said
    page = api.call("list_memories", {"tag": AUTO_CAPTURE_TAG}, CTX)["memories"]
    kinds = {next(t for t in ("pitfall", "episode", "convention") if t in m["tags"]): m["id"] for m in page}
    assert set(kinds) == {"pitfall", "episode", "convention"}, page
    return kinds


def test_keep_makes_an_episode_a_fact_and_takes_the_mark_off_each_kind(api, eng):
    ids = captured(api)
    episode = eng.get(ids["episode"])
    kept = api.call("keep_memory", {"memory_id": ids["episode"]}, CTX)
    assert kept["action"] == "keep" and kept["memory_type"] == "fact"
    assert kept["was"] == {"memory_type": "episode", "tags": list(episode.tags)}
    m = eng.get(ids["episode"])
    assert m.content == episode.content and m.memory_type == "fact" and m.importance >= 0.5
    assert AUTO_CAPTURE_TAG not in m.tags and "episode" not in m.tags and m.metadata["captured"] == "kept"
    assert any(e["action"] == "keep" for e in eng.history(m.id))
    # No longer an episode: the per-project episode budget (maintenance) never prunes it.
    idx = eng.index
    assert m.id not in prune_episodes(idx, idx.alive.copy(), 0)

    for kind, mtype in (("pitfall", "failure"), ("convention", "fact")):
        assert api.call("keep_memory", {"memory_id": ids[kind]}, CTX)["action"] == "keep"
        m = eng.get(ids[kind])
        assert m.memory_type == mtype and kind in m.tags and AUTO_CAPTURE_TAG not in m.tags
    assert not is_captured_convention(eng.get(ids["convention"]))  # now injected as any fact is
    assert api.call("list_memories", {"tag": AUTO_CAPTURE_TAG}, CTX)["total"] == 0


def test_keeping_a_convention_candidate_confirms_it(api, eng):
    said = api.call("capture_conventions", {"prompts": ["OK, store game state in Redis."]}, CTX)
    (s,) = said["stored"]
    assert s["candidate"]
    assert api.call("keep_memory", {"memory_id": s["memory_id"]}, CTX)["action"] == "keep"
    m = eng.get(s["memory_id"])
    assert "convention" in m.tags and "convention-candidate" not in m.tags and AUTO_CAPTURE_TAG not in m.tags
    assert api.call("keep_memory", {"memory_id": s["memory_id"]}, CTX)["action"] == "unchanged"


def test_keeping_twice_is_harmless_and_a_bad_id_is_a_clear_error(api, eng):
    ids = captured(api)
    api.call("keep_memory", {"memory_id": ids["episode"]}, CTX)
    before = eng.get(ids["episode"])
    again = api.call("keep_memory", {"memory_id": ids["episode"]}, CTX)
    assert again["action"] == "unchanged" and "already kept" in again["reason"]
    assert eng.get(ids["episode"]) == before
    with pytest.raises(NotFound, match="no memory with id 'm-nope'"):
        api.call("keep_memory", {"memory_id": "m-nope"}, CTX)


def test_keep_over_http(api, settings, serve):
    ids = captured(api)
    base = serve(build_app(api, token=None, settings=settings))
    with httpx.Client(base_url=base, timeout=30) as http:
        r = http.post(f"/memories/{ids['episode']}/keep")
        assert r.status_code == 200 and r.json()["memory_type"] == "fact", r.text
        assert http.post(f"/memories/{ids['episode']}/keep").json()["action"] == "unchanged"
        r = http.post("/memories/m-nope/keep")
        assert r.status_code == 404 and "m-nope" in r.json()["error"]
        listed = http.get("/memories", params={"tag": AUTO_CAPTURE_TAG}).json()["memories"]
        assert ids["episode"] not in {m["id"] for m in listed} and len(listed) == 2


def test_engram_keep_command(api, eng, capsys, tmp_path, monkeypatch):
    ids = captured(api)
    monkeypatch.chdir(tmp_path)

    def cli(*argv: str) -> tuple[int, str, str]:
        code = main(list(argv), api_factory=lambda settings: api)
        out, err = capsys.readouterr()
        return code, out, err

    code, out, _ = cli("keep", ids["pitfall"])
    assert code == 0 and out.strip() == f"kept {ids['pitfall']}: now a failure, no longer marked automatic"
    code, out, _ = cli("--json", "keep", ids["pitfall"])
    assert code == 0 and json.loads(out)["action"] == "unchanged"
    code, out, err = cli("keep", "m-nope")
    assert code == 1 and err.startswith("error: ") and "no memory with id 'm-nope'" in err and out == ""


def test_a_kept_pitfall_fixed_again_is_reinforced_and_stays_kept(api, eng):
    ids = captured(api)
    api.call("keep_memory", {"memory_id": ids["pitfall"]}, CTX)
    fix = captured_fix("claude-code", next(c for c in cases() if c["id"] == "rust-unresolved-import"))
    again = api.call("session_capture", {"fixes": [fix.to_dict()]}, Ctx(session_id="s2", project=PROJECT))
    assert again["reinforced"] == 1 and again["fixes"] == 0
    m = eng.get(ids["pitfall"])
    assert m.recall_count == 1 and AUTO_CAPTURE_TAG not in m.tags
