"""An engram opened before its model (load_model_later, as a daemon does on a machine that never
exported the model, issue 46): it serves as degraded, stores without vectors, and once load_model()
has run, embeds what was stored meanwhile and ranks by meaning."""

from __future__ import annotations

import pytest

from engram import Engram, Settings
from engram.core.errors import ModelMismatch
from engram.engram import MODEL_LOADING
from engram.models.embedding import loads_quickly

pytestmark = [pytest.mark.model, pytest.mark.duckdb_only]


def test_an_engram_serves_before_its_model_and_embeds_what_came_meanwhile(tmp_path, checked_model_cache):
    settings = Settings.from_env({"ENGRAM_HOME": str(tmp_path), "ENGRAM_MODEL_CACHE": str(checked_model_cache)})
    assert loads_quickly(settings.model, settings.model_cache, settings.torch_threads, settings.onnx)
    assert not loads_quickly(settings.model, tmp_path / "empty-cache", settings.torch_threads, settings.onnx)
    with Engram(tmp_path / "m.duckdb", settings=settings, degraded_ok=True, load_model_later=True) as eng:
        assert eng.degraded == MODEL_LOADING
        r = eng.store("Deploys go to Fly.io from the main branch")
        assert "stored without a vector" in r.reason
        assert [h.memory.id for h in eng.recall("deploys")] == [r.memory.id]  # keyword recall meanwhile
        assert vectors(eng) == {r.memory.id: False}
        assert eng.load_model() is True and eng.degraded is None
        assert not eng.load_model()  # loaded: nothing to do
        assert vectors(eng) == {r.memory.id: True}  # embedded at the load
        assert eng.recall("deploys")[0].memory.id == r.memory.id


def vectors(eng) -> dict[str, bool]:
    """Whether each stored memory has its vector."""
    return {m.id: blob is not None for m, blob in eng.store_db.iter_index_rows()}


def test_a_store_of_another_model_stays_keyword_only_and_says_why(tmp_path, checked_model_cache):
    settings = Settings.from_env({"ENGRAM_HOME": str(tmp_path), "ENGRAM_MODEL_CACHE": str(checked_model_cache)})
    path = tmp_path / "m.duckdb"
    with Engram(path, settings=settings, degraded_ok=True, load_model_later=True) as eng:
        eng.store_db.set_meta("model_name", "another-model")
        eng.store_db.set_meta("model_dim", "768")
        eng.store("The staging database listens on port 5433")
        with pytest.raises(ModelMismatch, match="another-model"):
            eng.load_model()
        assert "another-model" in eng.degraded
        assert eng.recall("staging database")  # keyword recall goes on
        assert not eng.retry_model()  # a call's retry does not try again: the same model will not match


def test_a_store_of_another_model_by_name_is_refused_before_the_model_loads(tmp_path, checked_model_cache):
    """The configured model's name is known before it loads: a store recorded with another name is
    refused at the open (as it is once the model is loaded), not served by keyword recall while a
    first start exports the model, which made the refusal depend on how fast the export ran."""
    settings = Settings.from_env({"ENGRAM_HOME": str(tmp_path), "ENGRAM_MODEL_CACHE": str(checked_model_cache)})
    path = tmp_path / "m.duckdb"
    with Engram(path, settings=settings) as eng:
        eng.store("The staging database listens on port 5433")
        eng.store_db.set_meta("model_name", "another-model")
    with pytest.raises(ModelMismatch, match=r"embedded with another-model .*engram reindex --reembed"):
        Engram(path, settings=settings, degraded_ok=True, load_model_later=True)
    with Engram(path, settings=settings, degraded_ok=True, load_model_later=True, allow_model_change=True) as eng:
        assert eng.state.model_changed  # what `engram reindex --reembed` opens with


def test_a_store_first_written_while_the_model_loads_records_its_model_then(tmp_path, checked_model_cache):
    """The first write of a new store can come while the model still loads (a first start on a
    machine): the name is recorded then, the dimensions once the model is back, so a command
    naming another model meanwhile is refused rather than taking the store over."""
    env = {"ENGRAM_HOME": str(tmp_path), "ENGRAM_MODEL_CACHE": str(checked_model_cache)}
    settings = Settings.from_env(env)
    path = tmp_path / "m.duckdb"
    with Engram(path, settings=settings, degraded_ok=True, load_model_later=True) as eng:
        eng.store("The on-call rotation changes every Monday at 10:00")
        assert eng.store_db.get_meta("model_name") == settings.model and eng.store_db.get_meta("model_dim") is None
    other = Settings.from_env({**env, "ENGRAM_MODEL": "another-model"})
    with pytest.raises(ModelMismatch, match=f"embedded with {settings.model} .*engram reindex --reembed"):
        Engram(path, settings=other, degraded_ok=True, load_model_later=True)
    with Engram(path, settings=settings, degraded_ok=True, load_model_later=True) as eng:
        assert eng.load_model() is True
        assert eng.store_db.get_meta("model_dim") == str(eng.embedder.dim)
        assert eng.recall("when does on-call rotate")[0].memory.content.startswith("The on-call rotation")
