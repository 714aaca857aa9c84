#!/usr/bin/env bash
# Where a project's shared memory could live, tried with real git (docs/sharing.md, "Where it
# lives"): a folder committed with the code, a branch of its own, git notes; what git status, a
# pull request's diff, a plain push and pull, a squash merge, a rebase and a shallow clone do to
# each. Run it in an empty directory: cd "$(mktemp -d)" && bash /path/to/share_placement_trial.sh
export GIT_AUTHOR_NAME=A GIT_AUTHOR_EMAIL=a@x GIT_COMMITTER_NAME=A GIT_COMMITTER_EMAIL=a@x
git init -q --bare -b main remote.git
git clone -q remote.git a 2>/dev/null; cd a; git checkout -q -b main
echo code > app.py; git add .; git commit -qm init; git push -q -u origin main 2>/dev/null; cd ..
git clone -q remote.git b 2>/dev/null
echo "== 1 folder in the tree"
cd a; git checkout -q -b feat; echo x>>app.py; mkdir -p .engram/shared/m1; echo '{"r":1}' > .engram/shared/m1/2026-12.jsonl
echo "status before commit:"; git status --short
git add .; git commit -qm "feat + records"; git push -q origin feat 2>/dev/null
echo "PR diff (main...feat):"; git diff --stat main...feat
git checkout -q main; git merge -q --squash feat; git commit -qm squashed; echo "after squash-merge: $(git show --stat --format= HEAD | tr "\n" ";")"; git push -q origin main 2>/dev/null; cd ..
git clone -q --depth 1 file://$PWD/remote.git shallow 2>/dev/null; echo "shallow clone has: $(ls shallow/.engram/shared/m1)"
echo "== 2 a branch of its own"
cd a; git checkout -q --orphan engram-memory; git rm -rq --cached . ; echo '{"r":2}' > mem.jsonl; git add mem.jsonl; git commit -qm mem; git checkout -q -f main
echo "plain git push (upstream main) pushes: $(git push --dry-run 2>&1 | grep -c engram-memory || true) refs of engram-memory"
git push -q origin engram-memory 2>/dev/null; cd ../b; git pull -q 2>/dev/null; echo "plain pull in b: local branch engram-memory exists? $(git branch --list engram-memory | wc -l) (remote-tracking: $(git branch -r --list origin/engram-memory | wc -l))"; cd ..
echo "== 3 git notes"
cd a; git notes add -m "{\"r\":3}" HEAD; echo "plain push carries notes: $(git push --dry-run --porcelain 2>&1 | grep -c notes)"; git push -q origin refs/notes/commits 2>/dev/null; cd ../b; git pull -q 2>/dev/null; echo "b sees notes after plain pull: $(git notes list 2>/dev/null | wc -l)"
cd ../a; git checkout -q -b f2; echo y>>app.py; git commit -qam f2; git notes add -m '{"r":4}' HEAD; git rebase -q main 2>/dev/null; git commit -q --amend -m f2b; echo "note on the amended commit: $(git notes show HEAD 2>&1 | head -1)"
git checkout -q main; git merge -q --squash f2; git commit -qm sq2; echo "note on squash commit: $(git notes show HEAD 2>&1 | head -1)"
cd ..; git clone -q --depth 1 file://$PWD/remote.git shallow2 2>/dev/null; cd shallow2; git fetch -q origin 'refs/notes/*:refs/notes/*' 2>/dev/null; echo "shallow clone + explicit notes fetch: $(git notes list | wc -l) notes, annotated commit present: $(git cat-file -t $(git notes list | awk '{print $2}' | head -1) 2>&1)"
