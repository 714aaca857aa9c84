"""Where a failure points, to decide whether an edit can have fixed it: the files and modules its
output and its command name, a test's module, the files that configure the program that failed.
"""

from __future__ import annotations

import re

from engram.continuity.shell_commands import program_of, targets

__all__ = ["ANSI", "PLACES_KEPT", "places_of", "touches"]

URL = re.compile(r"\b[a-z][a-z+.-]*://[^/\s]*(?:/\.well-known\S*)?")
ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
# Where an error points, for deciding whether an edit can have fixed it: the files its output and
# its command name, a test's module, a Python module it could not import.
PLACE_FILE = re.compile(r"(?<![\w@])((?:[\w.@-]+/)*[\w@-][\w.@-]*\.[A-Za-z][\w]{0,5})\b")
PLACE_MODULE = re.compile(r"(?:No module named|cannot import name \S+ from|from) '([\w.]+)'")
NOT_PLACES = ("site-packages/", "node_modules/", "/usr/lib", "/usr/local/lib", "dist-packages/", "<frozen")
PLACE_CLASS = re.compile(r"\b((?:[a-z]\w*\.){2,})([A-Z]\w*)")
PLACE_TEST_CLASS = re.compile(r"\b([A-Z]\w*(?:Test|Tests|Spec|IT))\b")
CLASS_TEST_SUFFIX = re.compile(r"(?<=[a-z0-9])(?:Tests?|Spec|IT)$")
TEST_AFFIXES = re.compile(r"^test_|_test$|_spec$|\.test$|\.spec$|^tests?$")
PLACES_KEPT = 40
PLACE_BARE = re.compile(r"\b(Makefile|GNUmakefile|Dockerfile|Containerfile|Gemfile|Rakefile|Procfile|Justfile)\b")
# The files that configure what a program builds, installs or runs: editing one can fix its failure
# without the error naming it (a dependency's version in package.json, a port in docker-compose.yml).
JS_CONFIG = "|".join(
    (
        r"package(?:-lock)?\.json",
        r"yarn\.lock",
        r"pnpm-lock\.yaml",
        r"tsconfig[\w.]*\.json",
        r"[\w.-]+\.config\.[cm]?[jt]s",
        r"\.npmrc",
        r"\.nvmrc",
    )
)
PY_CONFIG = (
    r"pyproject\.toml|requirements[\w.-]*\.txt|setup\.(?:py|cfg)|pytest\.ini|tox\.ini|conftest\.py|uv\.lock|"
    r"\.python-version"
)
CONFIGURES = [
    (
        re.compile(r"^(?:npm|npx|yarn|pnpm|node|bun|bunx|deno|tsc|vite|vitest|jest|eslint|next|webpack|playwright)$"),
        re.compile(rf"(?:^|/)(?:{JS_CONFIG}|\.eslintrc[\w.]*|biome\.jsonc?|\.prettierrc[\w.]*)$"),
    ),
    (
        re.compile(r"^(?:python[\d.]*|pytest|pip[\d.]*|uv|poetry|ruff|mypy|tox|nox|manage\.py|django-admin)$"),
        re.compile(rf"(?:^|/)(?:{PY_CONFIG}|ruff\.toml|mypy\.ini|\.flake8)$"),
    ),
    (re.compile(r"^cargo$"), re.compile(r"(?:^|/)(?:Cargo\.(?:toml|lock)|build\.rs|rust-toolchain(?:\.toml)?)$")),
    (re.compile(r"^go$"), re.compile(r"(?:^|/)go\.(?:mod|sum|work)$")),
    (
        re.compile(r"^(?:gradle|gradlew)$"),
        re.compile(r"(?:^|/)(?:(?:build|settings)\.gradle(?:\.kts)?|gradle\.properties)$"),
    ),
    (re.compile(r"^mvnw?$"), re.compile(r"(?:^|/)pom\.xml$")),
    (
        re.compile(r"^(?:docker|docker-compose|podman)$"),
        re.compile(r"(?:^|/)(?:(?:docker-)?compose[\w.-]*\.ya?ml|Dockerfile[\w.-]*|\.dockerignore|\.env)$"),
    ),
    (re.compile(r"^g?make$"), re.compile(r"(?:^|/)(?:GNUmakefile|Makefile|[\w.-]+\.mk)$")),
]


def places_of(command: str, output: str) -> list[str]:
    """The files and modules a failure names (in its command and its output), library paths left out."""
    found: list[str] = [f"config:{files.pattern}" for runs, files in CONFIGURES if runs.match(program_of(command))]
    text = URL.sub(" ", f"{command}\n{ANSI.sub('', output or '')}")  # a URL's host is no file (its path may be)
    for m in PLACE_FILE.finditer(text):
        f = m.group(1).strip(".")
        if "/" not in f and "." not in f:
            continue
        if any(n in f for n in NOT_PLACES) or re.fullmatch(r"[\d.]+", f) or f.startswith(("http", "www.")):
            continue
        found.append(f)
    for m in PLACE_MODULE.finditer(text):
        found.append(m.group(1).replace(".", "/"))
    found += PLACE_BARE.findall(text)
    for m in PLACE_CLASS.finditer(text):  # com.acme.Customer: the package's folder and the class
        package, cls = m.group(1).rstrip("."), m.group(2)
        found += [package.replace(".", "/"), cls]
    found += PLACE_TEST_CLASS.findall(text)
    # The command's operands: `manage.py test orders` names the orders app, `go test ./api/...` a package.
    found += [t.strip("./") for t in targets(command) if re.fullmatch(r"[\w./-]+", t) and t.strip("./")]
    return list(dict.fromkeys(found))[:PLACES_KEPT]


def _stem(path: str) -> str:
    """A file's name without its folder, extensions and test affixes: tests/test_money.py and
    OrderServiceTest.java are about money and orderservice."""
    name = CLASS_TEST_SUFFIX.sub("", path.rstrip("/").rsplit("/", 1)[-1].split(".", 1)[0])
    name = name.lower()
    return TEST_AFFIXES.sub("", name) or name


def touches(edit_path: str, places: list[str]) -> bool:
    """Whether an edit of `edit_path` can have fixed a failure that names `places`: the same file,
    the module a test of it tests (tests/test_gcode.py and opk/core/gcode.py), a file in the same
    directory, or inside a package or directory the failure names."""
    e = edit_path.lstrip("./")
    e_dir = e.rsplit("/", 1)[0] if "/" in e else ""
    for p in places:
        if p.startswith("config:"):
            if re.search(p[len("config:") :], e):
                return True
            continue
        p = p.lstrip("./")
        if not p:
            continue
        if e == p or e.endswith("/" + p) or p.endswith("/" + e):
            return True
        stem = _stem(p)
        other = _stem(e)
        if len(stem) > 2 and (
            stem == other
            or stem in e.lower().split("/")[:-1]
            or f"{stem}_".startswith(f"{other}_")
            or f"{other}_".startswith(f"{stem}_")
        ):
            return True  # the module a test tests: its file, or its package (test_money and money/split.py)
        p_dir = p.rsplit("/", 1)[0] if "/" in p else ""
        if e_dir and p_dir and (e_dir == p_dir or e_dir.endswith("/" + p_dir) or p_dir.endswith("/" + e_dir)):
            return True
        if "." not in p.rsplit("/", 1)[-1] and (e.startswith(p + "/") or f"/{p}/" in f"/{e}"):
            return True  # a package or directory the failure names
    return False
