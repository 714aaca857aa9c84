"""Errors in one module; the light modules (errors, ids, types, config) load no engine."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import subprocess
import sys

import engram
from engram.core.errors import EngramError


def test_every_engram_error_is_declared_in_engram_errors():
    seen = set()
    for info in pkgutil.walk_packages(engram.__path__, "engram."):
        if info.name == "engram.__main__":
            continue
        module = importlib.import_module(info.name)
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if issubclass(cls, EngramError):
                seen.add(cls)
                assert cls.__module__ == "engram.core.errors", f"{cls.__qualname__} is declared in {cls.__module__}"
    assert {c.__name__ for c in seen} >= {
        "NotFound",
        "ModelMismatch",
        "ModelUnavailable",
        "DatabaseLocked",
        "ExtensionError",
        "ImportConflict",
        "BindRefused",
    }


def test_the_light_modules_import_no_engine():
    code = (
        "import sys, engram.core.errors, engram.core.ids, engram.core.types, engram.core.settings, engram.cli; "
        "print(sorted(m for m in ('numpy', 'duckdb', 'torch', 'engram.engram', 'engram.api') "
        "if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_new_id_sorts_in_creation_order():
    from engram.core.ids import new_id

    ids = [new_id() for _ in range(1000)]
    assert ids == sorted(ids) and len(set(ids)) == 1000 and all(len(i) == 16 for i in ids)
