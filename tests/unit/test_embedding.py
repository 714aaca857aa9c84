import copy
import json
import logging
import os
import shutil
import subprocess
import sys
import threading

import numpy as np
import pytest

from engram.core.settings import Settings, onnx_from_env
from engram.models.embedding import SentenceTransformerEmbedder, load_embedder, onnx_unsupported

LONG = " ".join(f"step {i}: the deploy of service number {i} to the staging cluster went fine." for i in range(60))
TEXTS = [
    "ok",
    "",
    "The API timeout is 30 seconds.",
    "Caroline: I went to the LGBTQ support group yesterday and it was so powerful.",
    "Zoë’s café in 東京 — naïve résumé, 100 % ✓ 🚀 مرحبا بالعالم 👩‍👩‍👧",
    LONG,
    "Deploys go to Fly.io from main; rollbacks use `fly releases rollback`.",
    "x" * 40,
    "Meeting moved to Tuesday 14:00 CET because Kenji is travelling.",
    "The Rust port of the parser passes 412 of 415 conformance tests.",
]


@pytest.fixture(scope="module")
def onnx_cache(tmp_path_factory):
    return tmp_path_factory.mktemp("model_cache")


@pytest.fixture(scope="module")
def onnx_emb(onnx_cache):
    emb = SentenceTransformerEmbedder("all-MiniLM-L6-v2", onnx_cache)
    assert emb.backend == "onnx" and emb.onnx_exported
    return emb


@pytest.fixture(scope="module")
def torch_emb():
    """ENGRAM_ONNX=0, read by load_embedder as Engram's call (which names no backend) does."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ENGRAM_ONNX", "0")
        return load_embedder("all-MiniLM-L6-v2")


@pytest.mark.model
def test_a_query_embeds_as_in_a_batch(real_embedder):
    """embed_query runs the model's modules directly; it must give what encode() gives."""
    texts = [
        "The API timeout is 30 seconds.",
        "Deploys go to Fly.io from main.",
        "Caroline: I went to the LGBTQ support group yesterday and it was so powerful.",
    ]
    batch = real_embedder.embed_batch(texts)
    for text, expected in zip(texts, batch):
        got = real_embedder.embed_query(text + " ")  # a new string: not served from the cache
        assert got.dtype == np.float32 and got.shape == (real_embedder.dim,)
        assert abs(float(np.linalg.norm(got)) - 1.0) < 1e-5
        assert float(got @ expected) > 0.9999
        assert float(real_embedder.embed_batch([text])[0] @ expected) > 0.9999


@pytest.mark.model
def test_onnx_is_the_default_and_torch_is_off_by_setting(real_embedder, torch_emb):
    assert real_embedder.backend == "onnx"  # no cache folder: exported in memory
    assert torch_emb.backend == "torch" and torch_emb._onnx is None
    assert Settings.from_env({"ENGRAM_ONNX": "0"}).onnx is False
    assert Settings.from_env({"ENGRAM_ONNX": "false"}).onnx is False
    assert Settings.from_env({}).onnx is True and onnx_from_env({"ENGRAM_ONNX": "1"}) is True
    with pytest.raises(ValueError, match="ENGRAM_ONNX"):
        Settings.from_env({"ENGRAM_ONNX": "maybe"})


@pytest.mark.model
def test_onnx_vectors_equal_torch_vectors(onnx_emb, torch_emb):
    """Single texts (short, empty, non-ASCII, longer than max_seq_length) and batches with padding,
    small (one thread) and large (the two-thread session)."""
    for text in TEXTS:
        got, want = onnx_emb._embed_one(text), torch_emb._embed_one(text)
        assert got.dtype == np.float32 and got.shape == (384,)
        assert np.abs(got - want).max() < 1e-5, text[:40]
    short = [t for t in TEXTS if t != LONG]
    for texts in (TEXTS[:5], TEXTS, short * 8):  # 5: one thread; 10 and 72 (two batches): large
        got, want = onnx_emb.embed_batch(texts), torch_emb.embed_batch(texts)
        assert got.shape == (len(texts), 384) and np.abs(got - want).max() < 1e-5
    assert onnx_emb._onnx.large_session() is not onnx_emb._onnx.session


@pytest.mark.model
def test_long_text_is_truncated_at_max_seq_length_as_sentence_transformers_does(onnx_emb, torch_emb):
    limit = torch_emb._torch.model.max_seq_length
    assert onnx_emb._tokenize([LONG])["input_ids"].shape[1] == limit == 256
    st = torch_emb._torch.model.encode([LONG], normalize_embeddings=True, convert_to_numpy=True)[0]
    assert np.abs(onnx_emb._embed_one(LONG) - st).max() < 1e-5
    # The part past the limit does not count.
    assert np.abs(onnx_emb._embed_one(LONG + " and then everything broke.") - st).max() < 1e-6


@pytest.mark.model
def test_concurrent_calls_give_the_same_vectors(onnx_emb):
    texts = [t for t in TEXTS if t != LONG]
    want = onnx_emb.embed_batch(texts)
    errors: list[BaseException] = []

    def work(i: int) -> None:
        try:
            for _ in range(2):
                assert np.abs(onnx_emb._embed_one(texts[i]) - want[i]).max() < 1e-6
                assert np.abs(onnx_emb.embed_batch(texts) - want).max() < 1e-6
        except AssertionError as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


@pytest.mark.model
def test_the_graph_is_cached_reused_and_replaced_when_corrupt(onnx_emb, tmp_path, caplog):
    src = onnx_emb.onnx_file
    assert src is not None and src.parent.name == "onnx" and src.name.startswith("all_MiniLM_L6_v2-")
    # The graph and the manifest of its check, no temporary file left behind.
    assert sorted(src.parent.iterdir()) == [src.with_suffix(".json"), src]
    cache = tmp_path / "model_cache"
    (cache / "onnx").mkdir(parents=True)
    shutil.copy2(src, cache / "onnx" / src.name)
    stale = cache / "onnx" / "all_MiniLM_L6_v2-0123456789abcdef.onnx"
    stale.write_bytes(b"from another version")
    stale_lock = cache / "onnx" / ".all_MiniLM_L6_v2-0123456789abcdef.lock"  # its export_lock's file
    stale_lock.touch()
    target = cache / "onnx" / src.name
    mtime = target.stat().st_mtime_ns

    caplog.set_level(logging.INFO, logger="engram.models.embedding")
    again = SentenceTransformerEmbedder("all-MiniLM-L6-v2", cache)
    assert again.backend == "onnx" and not again.onnx_exported and again.onnx_file == target
    assert again.checked == "checked" and target.with_suffix(".json").exists()  # checked: trusted next time
    assert target.stat().st_mtime_ns == mtime
    assert "cached graph" in caplog.text and stale.exists() and stale_lock.exists()

    target.write_bytes(target.read_bytes()[:1000])  # cut short, as by a crash without os.replace
    caplog.clear()
    fixed = SentenceTransformerEmbedder("all-MiniLM-L6-v2", cache)
    assert fixed.backend == "onnx" and fixed.onnx_exported
    # The manifest no longer matches the file: not trusted, checked again, found unreadable.
    assert "cannot be used" in caplog.text and "unreadable" in caplog.text
    assert target.stat().st_size > 1_000_000
    names = sorted(p.name for p in (cache / "onnx").iterdir())
    assert names == [target.with_suffix(".json").name, target.name]  # the stale graph and its lock removed
    assert np.abs(fixed._embed_one(TEXTS[3]) - onnx_emb._embed_one(TEXTS[3])).max() < 1e-6


TRUSTED_START = """
import json, sys
from pathlib import Path
from engram.models.embedding import SentenceTransformerEmbedder
emb = SentenceTransformerEmbedder("all-MiniLM-L6-v2", Path(sys.argv[1]))
texts = json.load(sys.stdin)
print(json.dumps({"backend": emb.backend, "checked": emb.checked, "vectors": emb.embed_batch(texts).tolist(),
                  "loaded": sorted(m for m in ("torch", "sentence_transformers", "transformers") if m in sys.modules)}))
"""


@pytest.mark.model
def test_a_later_start_trusts_the_checked_graph_and_loads_no_torch(onnx_emb, onnx_cache):
    assert onnx_emb.checked == "checked" and onnx_emb.onnx_file.with_suffix(".json").exists()
    assert onnx_emb._torch is None  # this process dropped the torch model once the graph passed
    # A fresh process, as the daemon is after an idle exit: torch is already imported in this one.
    r = subprocess.run(
        [sys.executable, "-c", TRUSTED_START, str(onnx_cache)],
        input=json.dumps(TEXTS),
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["backend"] == "onnx" and out["checked"] == "trusted" and out["loaded"] == []
    assert np.abs(np.array(out["vectors"]) - onnx_emb.embed_batch(TEXTS)).max() < 1e-6


@pytest.mark.model
def test_a_new_library_version_makes_the_graph_checked_again(onnx_cache, tmp_path, monkeypatch):
    cache = tmp_path / "model_cache"
    shutil.copytree(onnx_cache, cache)
    trusted = SentenceTransformerEmbedder("all-MiniLM-L6-v2", cache)
    assert trusted.checked == "trusted" and not trusted.onnx_exported

    from engram.models import onnx_export

    versions = onnx_export.installed_versions()
    monkeypatch.setattr(onnx_export, "installed_versions", lambda: [*versions, ["onnxruntime", "99.0"]])
    again = SentenceTransformerEmbedder("all-MiniLM-L6-v2", cache)
    assert again.checked == "checked" and again.onnx_exported and again.onnx_file != trusted.onnx_file
    names = sorted(p.name for p in (cache / "onnx").iterdir())  # the old key's graph and manifest went
    assert names == [again.onnx_file.with_suffix(".json").name, again.onnx_file.name]
    assert np.abs(again.embed_batch(TEXTS) - trusted.embed_batch(TEXTS)).max() < 1e-6


@pytest.mark.model
def test_a_pipeline_the_graph_does_not_reproduce_stays_on_torch(torch_emb, monkeypatch, caplog):
    modules = list(torch_emb._torch.model)
    assert onnx_unsupported(torch_emb._torch.model) is None
    cls = copy.copy(modules[1])
    cls.pooling_mode = "cls"
    assert "pooling is cls" in onnx_unsupported([modules[0], cls])
    assert "modules are" in onnx_unsupported([modules[0]])

    from engram.models import embedding

    monkeypatch.setattr(embedding, "onnx_unsupported", lambda model: "its pooling is cls, not mean")
    caplog.set_level(logging.INFO, logger="engram.models.embedding")
    emb = SentenceTransformerEmbedder("all-MiniLM-L6-v2")
    assert emb.backend == "torch"
    lines = [r for r in caplog.records if r.name == "engram.models.embedding"]
    assert len(lines) == 1 and "its pooling is cls" in lines[0].getMessage()


@pytest.mark.model
@pytest.mark.parametrize("failure", ["no onnxruntime", "export fails", "vectors differ"])
def test_when_onnx_cannot_be_used_torch_serves_and_the_log_says_why(failure, tmp_path, monkeypatch, caplog):
    import sys

    from engram.models import embedding

    if failure == "no onnxruntime":
        monkeypatch.setitem(sys.modules, "onnxruntime", None)
        expected = "onnxruntime is not installed"
    elif failure == "export fails":
        from engram.models import onnx_runtime

        def boom(reference, names):
            raise RuntimeError("exporter exploded")

        monkeypatch.setattr(onnx_runtime, "export_graph", boom)  # the name the runtime calls it by
        expected = "export failed (RuntimeError: exporter exploded)"
    else:
        monkeypatch.setattr(embedding.OnnxRuntime, "_error", lambda self, session, reference: 0.01)
        expected = "differ from torch's by 0.01"
    caplog.set_level(logging.INFO, logger="engram.models.embedding")
    emb = SentenceTransformerEmbedder("all-MiniLM-L6-v2", tmp_path)
    assert emb.backend == "torch" and emb._onnx is None
    lines = [r for r in caplog.records if r.name == "engram.models.embedding"]
    assert len(lines) == 1 and lines[0].levelno == logging.WARNING and expected in lines[0].getMessage()
    assert not (tmp_path / "onnx").exists() or not list((tmp_path / "onnx").iterdir())
    assert emb.embed_batch(TEXTS[:3]).shape == (3, 384)
