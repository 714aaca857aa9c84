"""detect_project on real git repositories: clones, worktrees, remotes in every form, no repository."""

from __future__ import annotations

import subprocess

import pytest

from engram.core.errors import EngramError
from engram.core.project import check_project, detect_project, normalise_remote
from tests.conftest import git, make_repo

NO_ENV: dict[str, str] = {}


@pytest.mark.parametrize(
    "url",
    [
        "git@github.com:Me/Repo.git",
        "https://github.com/Me/Repo",
        "https://github.com/Me/Repo.git/",
        "ssh://git@github.com/Me/Repo.git",
        "ssh://git@github.com:2222/Me/Repo.git",
        "https://user:pw@GitHub.com/Me/Repo.git",
        "git+ssh://git@github.com/Me/Repo",
    ],
)
def test_every_form_of_one_remote_is_one_project(url):
    assert normalise_remote(url) == "github.com/Me/Repo"


def test_a_local_remote_is_its_resolved_path(tmp_path):
    assert normalise_remote(str(tmp_path / "a" / ".." / "b")) == str((tmp_path / "b").resolve())
    assert normalise_remote(f"file://{tmp_path}/b") == str((tmp_path / "b").resolve())
    assert normalise_remote("  ") == ""


def test_origin_decides_and_a_clone_is_the_same_project(tmp_path):
    a = make_repo(tmp_path / "a", "git@github.com:me/app.git")
    sub = a / "src" / "deep"
    sub.mkdir(parents=True)
    p = detect_project(sub, NO_ENV)
    assert p is not None and p.id == "github.com/me/app" and p.name == "app" and p.source == "origin"
    assert p.root == str(a) and p.branch == "main"
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(a), str(clone)], check=True, capture_output=True)
    git(clone, "remote", "set-url", "origin", "https://github.com/me/app")  # the same repository, by https
    assert detect_project(clone, NO_ENV).id == "github.com/me/app"


def test_without_origin_every_worktree_is_the_main_repository(tmp_path):
    a = make_repo(tmp_path / "a")
    wt = tmp_path / "wt"
    git(a, "worktree", "add", "-q", "-b", "feature", str(wt))
    main, other = detect_project(a, NO_ENV), detect_project(wt, NO_ENV)
    assert main.id == other.id == str(a.resolve()) and main.source == other.source == "path"
    assert main.branch == "main" and other.branch == "feature"  # the branch is beside the identity
    assert other.root == str(wt)


def test_a_worktree_of_a_repository_with_origin_has_its_origin(tmp_path):
    a = make_repo(tmp_path / "a", "https://example.org/team/tool.git")
    wt = tmp_path / "wt"
    git(a, "worktree", "add", "-q", "-b", "x", str(wt))
    assert detect_project(wt, NO_ENV).id == "example.org/team/tool"


def test_a_clone_without_origin_is_its_own_project(tmp_path):
    a = make_repo(tmp_path / "a")
    b = make_repo(tmp_path / "b")
    assert detect_project(a, NO_ENV).id != detect_project(b, NO_ENV).id


def test_a_detached_head_has_no_branch(tmp_path):
    a = make_repo(tmp_path / "a")
    git(a, "checkout", "-q", "--detach")
    assert detect_project(a, NO_ENV).branch is None


def test_a_repository_with_no_commit_yet_is_a_project_on_its_branch(tmp_path):
    """`git init` and start working: HEAD names no commit yet, the repository is still the project."""
    (tmp_path / "new").mkdir()
    git(tmp_path / "new", "init", "-q", "-b", "trunk")
    p = detect_project(tmp_path / "new", NO_ENV)
    assert p is not None and p.id == str((tmp_path / "new").resolve()) and p.branch == "trunk"


def test_no_repository_no_project(tmp_path):
    assert detect_project(tmp_path, NO_ENV) is None
    assert detect_project(tmp_path / "missing", NO_ENV) is None


def test_engram_project_overrides_everything(tmp_path):
    a = make_repo(tmp_path / "a", "git@github.com:me/app.git")
    p = detect_project(a, {"ENGRAM_PROJECT": "acme/billing"})
    assert p.id == "acme/billing" and p.name == "billing" and p.source == "env" and p.root is None
    assert detect_project(tmp_path, {"ENGRAM_PROJECT": "solo"}).id == "solo"
    assert detect_project(a, {"ENGRAM_PROJECT": "  "}).id == "github.com/me/app"  # blank: not set


def test_check_project_refuses_what_no_row_should_hold():
    assert check_project(None) is None and check_project("github.com/me/app") == "github.com/me/app"
    for bad in ("", "   ", 3, "x" * 1001):
        with pytest.raises(EngramError, match="project"):
            check_project(bad)
