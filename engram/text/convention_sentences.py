"""Which sentences of a user's prompt state a convention or a decision of the project, by rules.

`conventions_in("Thanks! In this repo we install packages with uv, never pip. Can you add httpx?")`
is `["In this repo we install packages with uv, never pip."]`: a sentence that says how things are
done here ("we use ...", "never ...", "always ...", "from now on ...", "prefer X over Y",
"remember that ...", "X must ..."; 我们用…, 不要…, 以后都…, 记住…, 统一用…; and a few forms in
Japanese, Spanish, French and German). Questions, one-off requests ("fix the bug in x", "don't
run the suite this time"), hypotheticals, text about third parties, and quoted text (code blocks,
blockquotes, pasted logs, text in quotation marks) are not conventions. Leading politeness and
lead-ins ("please", "btw", "remember that") are dropped, so the sentence reads on its own.

`convention_statements` also says how each holds: said as standing (a cue such as "always",
"from now on", "in this repo", "we use", "after each", a "remember that"), or a candidate: a rule
said once without one ("each panel should ...", "don't ...", a request that sets a rule, "update
the skill to run `nvm use 20` before running tests", a decision, "store game state in Redis"),
which engram.continuity.conventions keeps, searchable, until it is confirmed. Only the user's own
words count: of a slash-command kit's template only what the user typed into it, nothing of a
pasted document with headings, of a pasted error or stack trace, or of a rule that only points
back ("like that from now on").

No model: the rules were tuned on the tune half of tests/data/convention_prompts.json
(benchmarks/conventions_eval.py scores both halves) and on the tune half of the real transcripts
of issue 45 (standing versus candidate: benchmarks/RESULTS.md).
"""

from __future__ import annotations

import re
from itertools import pairwise
from typing import NamedTuple

__all__ = ["TOPICS", "Statement", "convention_statements", "conventions_in", "topics_of"]

MAX_SENTENCE_CHARS = 400  # a longer "sentence" is a pasted paragraph, not something said in passing
FRAGMENT_WORDS = 3  # "Never pip." after a convention completes it rather than standing alone

_FENCE = re.compile(r"```.*?(?:```|\Z)|~~~.*?(?:~~~|\Z)", re.S)
# Hook output some clients put into the prompt (engram's own blocks among them).
_TAGGED = re.compile(r"<(hook_context|engram[\w-]*|system-reminder)>.*?</\1>", re.S)
# A line of a pasted log or program output: a traceback, a test runner's or compiler's report.
_LOG_LINE = re.compile(
    r"^\s*(?:Traceback \(|File \"|at \S+ \(|E {2,}|FAILED\b|PASSED\b|ERROR\b|npm (?:ERR|WARN)!|"
    r"\w*(?:Error|Exception|Warning)\b:|error(?:\[\w+\])?:|warning:|fatal:|panic:|\$ |>>> |\.\.\. |"
    r"\d{4}-\d\d-\d\d[ T]\d\d:\d\d|\[\d\d:\d\d|\[?(?:INFO|DEBUG|WARN|TRACE)\b)"
)
_QUOTED = re.compile(r"\"[^\"\n]*\"|“[^”\n]*”|「[^」\n]*」|『[^』\n]*』|«[^»\n]*»|`[^`\n]*`")
# Split after . ! ? (then a space) and after the CJK full stops; not after e.g., i.e., vs., etc.
_SENTENCE_END = re.compile(r"(?<!\be\.g)(?<!\bi\.e)(?<!\bvs)(?<!\betc)(?<=[.!?])\s+|(?<=[。！？])")

# -- lead-ins dropped from the start; those that mark a memo make the rest a convention
_MEMO = (
    r"remember(?: that)?|please remember(?: that)?|keep in mind(?: that)?|note that|note|fyi|"
    r"just so you know|for the record|for your information|heads up|important|here'?s the deal|"
    r"let'?s settle this|decision|the rule is|"
    r"请记住|记住|记得|注意|重要|顺便说一下|recuerda que|souviens-toi que|rappelle-toi que|merk dir"
)
_POLITE = (
    r"ok(?:ay)?|so|and|also|oh|hey|hi|well|alright|thanks|thank you|great|cool|btw|by the way|"
    r"one more thing|please|pls|kindly|if so|"
    r"好的|好|嗯|对了|另外|还有|顺便|请|谢谢"
)
_LEAD = re.compile(rf"^(?:(?P<memo>{_MEMO})|(?:{_POLITE}))(?![a-zA-Z0-9_-])[\s,:;.!—，：；。！、-]*", re.I)
# Of the memo lead-ins, those that ask for the rest to be kept (the others, "note that", "FYI",
# "important", on real sessions mostly lead into a fact of this task: a candidate).
_KEEP_MEMO = re.compile(
    r"^(?:(?:please )?remember|keep in mind|for the record|let'?s settle this|decision|the rule is|请记住|记住|记得|"
    r"recuerda|souviens|rappelle|merk dir)",
    re.I,
)
_TRAIL = re.compile(r"[\s,]*(?:please|thanks|thank you|thx|谢谢)\s*(?=[.!。！]?$)", re.I)

# -- what is not a convention
_QUESTION_START = re.compile(
    r"^(?:how|what|why|where|which|who|whom|when|is|are|was|were|do(?!n't| not)|does|did|can|could|"
    r"would|will|shall|may|might|isn't|aren't|doesn't|didn't|won't|wouldn't|shouldn't|should(?= we| i\b))\b",
    re.I,
)
_QUESTION_ZH = re.compile(
    r"[？?]|[吗呢么][。！]?$|怎么|为什么|是不是|要不要|能不能|可不可以|哪个|哪里|如何|什么|"
    r"ますか|ですか|¿"
)
_HYPOTHETICAL = re.compile(
    r"^(?:if|what if|suppose|supposing|imagine|maybe|perhaps|let'?s try|let'?s see|"
    r"would|could we|如果|假如|要是|假设|もし|si\b|wenn\b)",
    re.I,
)
_THIRD_PARTY = re.compile(
    r"^(?:they|he|she|people|some people|many|most|my (?:colleague|coworker|boss|friend|"
    r"manager|team ?lead)\w*|the upstream|upstream|their|his|her|the other team|"
    r"他们|他|她|别人|有人|对方)\b|\b(?:says|said|recommends)\b",
    re.I,
)
_NEAR_MISS = re.compile(
    r"\b(?:never ?mind|always (?:get|getting|gets|fail|fails|failing|happen|happens|break|breaks|crash|crashes|"
    r"forget|forgets|is a)|never (?:worked|works|seen|saw|happened)|(?:don't|do not|never) (?:worry|bother|"
    r"know|think|understand|see|care|get|remember|mind|forget|do that|do this)|run into|ran into|"
    r"must (?:be something|have)|should probably|"
    r"always is\b)|不用了|别担心|不要担心|不要紧|没关系|总是(?:遇到|失败|报错|出错|出现)|一直(?:报错|失败)",
    re.I,
)
_ONE_OFF = re.compile(
    r"\b(?:this time|for now|right now|for the moment|at the moment|today|this once|yet|"
    r"in this pr|in this commit|this one|until i)\b|这次|先不要|先别|现在先|暂时|今天",
    re.I,
)
_REQUEST_START = re.compile(
    r"^(?:fix|add|run|write|update|rename|refactor|make|create|remove|delete|revert|split|find|check|look|"
    r"show|explain|implement|move|change|convert|continue|go|try|commit|push|help|debug|investigate|review|"
    r"bump|build|test|verify|confirm|install|configure|set up|setup|clean up|open|read|print|list|generate|prepare|"
    r"let'?s|can you|could you|帮我|给|把|跑|继续|更新|修)\b"
    r"(?!\s+(?:messages?|files?|cases?|suites?|names?|runs?|scripts?)\b)",
    re.I,
)  # "commit messages must ..."

# -- what states one (tested on the sentence with quoted spans blanked out)
_GENERAL = r"always|never|everywhere|every time|whenever|for all|for every|for anything|in general"
_TRIGGERS = [
    re.compile(p, re.I)
    for p in (
        r"^(?:always|never|don'?t|do not|don't ever|no more than|avoid)\b",
        r"[:;,]\s*(?:always|never|don'?t|do not)\b",
        r"\bwe(?:'ve| have|'re| are)?\s+(?:always|never|usually|generally|only|now|all|normally|typically|"
        r"consistently|don'?t|do not|standardi[sz]ed|decided|agreed|switched|moved|settled|chose|go with|went with|"
        r"use|prefer|install|deploy|run|write|keep|name|format|store|follow|build|test|squash|rebase|merge|pin|"
        r"target|avoid|require|ship|release|vendor|log|commit|tag|document|call|handle|return|put|prefix|host|"
        r"manage|lint|check|track|publish|version|using)\b",
        r"^we'll\b",  # after "Decision:" (a memo lead-in); a plain "we'll fix it" is not one
        r"\bi (?:always|never|prefer)\b",
        r"\bprefer\b.*\b(?:over|to|rather than|instead of)\b|^prefer\b",
        r"\b(?:from now on|going forward|(?<!before )(?<!after )moving forward|henceforth|from here on|in future)\b",
        r"\b(?:our|the) (?:convention|rule|policy|standard|practice|style|guideline)s?\b.*\b(?:is|are)\b",
        r"\bin this (?:repo|repository|project|codebase|code base|service|monorepo|team)\b",
        r"^(?:all|every|each|any|no)\b.*\b(?:must|should|need|needs|has to|have to|are|is)\b",
        r"^(?!(?:it|this|that|i|you|he|she|they|there|which|what)\b)[\w .,/'-]{2,60}?\bmust\b",
        r"^(?!(?:it|this|that|i|you|he|she|they|there|which|what|the|my|your)\b)[\w .,/'-]{2,60}?\bshould\b",
        r"\b(?:is|are|must be)\s+(?:always|never)\b",
        rf"^(?:please )?(?:use|keep|put|write|name|run)\b.*\b(?:{_GENERAL})\b",
        # Chinese
        r"^(?:我们|咱们)(?:的)?\s*(?:一般|通常|都|统一|一律|总是|一直|只|从不|从来不|决定|约定|规定|习惯|用|使用|采用|"
        r"不|部署|约定|规范|惯例|.{0,12}都)",
        r"(?:^|[，,])\s*(?:永远|绝不|绝对不|千万)?(?:不要|别|禁止|不准|不许|切勿|不能)",
        r"^(?:以后|今后|往后|从现在(?:开始|起))",
        r"统一|一律|必须|务必|一定要|都要|都以|都用|都放|优先(?:用|使用|考虑)",
        r"在这个(?:仓库|项目|代码库|repo)",
        r"^所有.*(?:都|必须|要)",
        # Japanese, Spanish, French, German
        r"今後|これから(?:は)?|常に|必ず|絶対に|決して|ないでください|このリポジトリでは|このプロジェクトでは",
        r"\b(?:a partir de ahora|de ahora en adelante|siempre|nunca|jamás|usamos|utilizamos|no uses|"
        r"en este (?:repo|proyecto))\b",
        r"\b(?:désormais|à partir de maintenant|toujours|jamais|on utilise|nous utilisons|n'utilise|"
        r"dans ce (?:dépôt|projet|repo))\b",
        r"\b(?:ab jetzt|von nun an|künftig|immer|niemals|nie|wir (?:verwenden|nutzen|benutzen)|"
        r"in diesem (?:repo|projekt))\b",
    )
]


# A slash-command kit's template, expanded into the prompt by the client: the same text for every
# user of the kit, around what this user typed. spec-kit puts the user's words in a fenced block
# under "## User Input"; other kits' templates start with their command as a heading
# ("# /butler-exec — ..."), carry the $ARGUMENTS placeholder or wrap their steps in tags.
_KIT_INPUT = re.compile(r"^#{1,6}\s*User Input\s*\n+(?:```|~~~)[\w-]*\n(.*?)\n(?:```|~~~)", re.M | re.S)
_KIT_MARKER = re.compile(
    r"\$ARGUMENTS|\A\s*#{1,6}\s*/[\w.:-]+|^You \*\*MUST\*\* consider the user input|\A\s*<(?:objective|command-)",
    re.M,
)
_HEADING = re.compile(r"^#{1,6}\s+\S", re.M)
DOCUMENT_HEADINGS = 3  # a prompt with this many markdown headings is a document (a spec, a plan, a
# template) pasted or generated, not something the user says: it holds no convention of theirs
_SLASH_COMMAND = re.compile(r"\A\s*/[\w.:-]+(?:\s+|\Z)")  # "/speckit.specify <what the user typed>"
# An error pasted after the user's words on their line ("now this one (index):1 Uncaught TypeError:
# ... must start with ..."): the rest of the line is the program's.
_INLINE_ERROR = re.compile(r"(?:\bUncaught )?\b[A-Z]\w*(?:Error|Exception)\b:|\b(?:error|warning)(?:\[\w+\])?:")
# A line of a stack trace, the lines around which are a pasted log too.
_TRACE_LINE = re.compile(r"^\s*(?:at\s+\S|File \"|Traceback \(|\^+\s*$|~+\s*$)")


def _users_text(prompt: str) -> str:
    """The part of a prompt the user wrote: a kit's template reduced to the user's input in it
    (none when it shows none), a document with headings to nothing, a slash command to its
    arguments."""
    kit = _KIT_INPUT.search(prompt)
    if kit:
        return kit.group(1)
    if _KIT_MARKER.search(prompt) or len(_HEADING.findall(prompt)) >= DOCUMENT_HEADINGS:
        return ""
    return _SLASH_COMMAND.sub("", prompt, count=1)


def _without_quotes(prompt: str) -> str:
    """The prompt without what the user quoted or pasted: code blocks, tagged hook output,
    blockquote lines, lines of a log, indented code, and a paragraph with a stack trace in it
    (the message above the trace is the program's words, not the user's)."""
    text = _TAGGED.sub("\n", _FENCE.sub("\n", prompt))
    paragraphs = re.split(r"\n\s*\n", text)
    text = "\n\n".join(p for p in paragraphs if sum(bool(_TRACE_LINE.match(x)) for x in p.splitlines()) < 2)
    kept = [
        _INLINE_ERROR.split(line, maxsplit=1)[0]
        for line in text.splitlines()
        if not line.lstrip().startswith(">") and not _LOG_LINE.match(line) and not re.match(r"^(?: {4}|\t)", line)
    ]
    return "\n".join(kept)


def _clean(sentence: str) -> tuple[str, str]:
    """The sentence without leading politeness and lead-ins, first letter capitalised; and
    the lead-in that marked it as a memo ("remember that ...", "FYI", 记住), or ""."""
    s, memo = sentence.strip(), ""
    while True:
        m = _LEAD.match(s)
        if not m or m.end() == 0:
            break
        memo = memo or (m.group("memo") or "")
        s = s[m.end() :].lstrip()
    s = _TRAIL.sub("", s).strip()
    if s[:1].isascii() and s[:1].islower():
        s = s[0].upper() + s[1:]
    return s, memo


# -- how it holds. A sentence with a cue of standing (always, never, from now on, in this repo, we
# use, every time, a memo lead-in) is a convention; a rule said without one ("X should ...", "don't
# ...", a request that sets a rule, a decision) is a candidate, kept until it is confirmed (said
# again in another session, or kept by the user): on real sessions most of them were this task's
# specification ("each panel should support ...") rather than a rule of the project, except when
# they are about how the code or the work is done (commits, tests, logging, ...: _WORK).
STANDING = "standing"
CANDIDATE = "candidate"
_STANDING = re.compile(
    rf"\b(?:{_GENERAL}|each time|from now on|going forward|(?<!before )(?<!after )moving forward|henceforth|"
    r"from here on|in future|in the future|as a rule)\b|\b(?:after|before|as) (?:each|every)\b|"
    r"\bin this (?:repo|repository|project|codebase|code base|service|monorepo|team)\b|"
    r"\bwe(?:'ve| have|'re| are)?\s+(?:always|never|usually|generally|only|normally|typically|consistently|"
    r"standardi[sz]ed|decided|agreed|settled|use|prefer|install|deploy|run|write|keep|name|format|store|follow|"
    r"build|test|squash|rebase|merge|pin|target|require|ship|release|vendor|log|commit|tag|document|host|"
    r"manage|lint|publish|version|using)\b|"
    r"\bi (?:always|never|prefer)\b|\bprefer\b.*\b(?:over|to|rather than|instead of)\b|^prefer\b|"
    r"\b(?:our|the) (?:convention|rule|policy|standard|practice|style|guideline)s?\b.*\b(?:is|are)\b|"
    r"以后|今后|往后|从现在|永远|绝不|统一|一律|总是|每次|都要|都用|都以|都放|在这个|^(?:我们|咱们)|^所有|"
    r"今後|これから|常に|必ず|決して|毎回|このリポジトリでは|このプロジェクトでは|"
    r"\b(?:siempre|nunca|jamás|a partir de ahora|de ahora en adelante|usamos|utilizamos|en este (?:repo|proyecto)|"
    r"toujours|jamais|désormais|à partir de maintenant|on utilise|nous utilisons|dans ce (?:dépôt|projet|repo)|"
    r"immer|niemals|nie|ab jetzt|von nun an|künftig|wir (?:verwenden|nutzen|benutzen)|in diesem (?:repo|projekt))\b",
    re.I,
)
_IN_THIS = re.compile(r"\bin this (?:repo|repository|project|codebase|code base|service|monorepo|team)\b")
# What the code's and the work's conventions are about (beyond TOPICS, below).
_WORK = re.compile(
    r"\b(?:functions|methods|class(?:es)?|modules|docstrings?|code comments|type hints|variables|naming|imports|"
    r"endpoints?|columns|schema|config(?:uration)?|env vars?|environment variables|pull requests?|prs?|"
    r"ci|pipelines?|dockerfiles?|readme|documentation|changelog|exceptions|timestamps|utc|snake_case|camelcase|"
    r"indentation|secrets|tokens|passwords)\b",
    re.I,
)
# A request that sets a rule or a decision about the stack: a candidate ("update the skill to run
# `nvm use 20` before running tests", "in the Dockerfiles, run `npm ci` before copying the sources",
# "let's go with Redis for the game state").
_RULE_REQUEST = re.compile(
    r"\b(?:make sure|be sure|ensure|remember to|before (?:you |we )?(?:running|committing|pushing|merging|"
    r"deploying|releasing|copying|building|testing|each|every)|after (?:each|every)|as each|once tests pass|"
    r"let'?s (?:go with|use|stick with|keep)|we(?:'ll| will| should| want to) (?:use|go with|stick with|keep)|"
    r"go with|stick with|switch (?:\w+ )?to|instead of \w+,? use|store (?:the |all )?\w+(?: \w+)? in|"
    r"(?:should|must|needs? to) (?:always |also )?be documented|preferably|i (?:only )?want (?:each|every|all|only)|"
    r"we(?:'ll| will) (?:also )?(?:want|need) (?!to\b)|we should|i(?:'d| would) prefer|"
    r"^the [\w .,/'-]{2,60}?\bshould|"
    r"(?:before|prior to) (?:you |we )?(?:running|committing|pushing|merging|deploying|releasing|moving on|"
    r"moving forward|continuing)|as you (?:go|implement|work|build|write|add)|let'?s avoid|"
    r"one \w+ at a time|i want (?:all|every|each) of|i(?:'d| would) like (?:to use|you to use|us to use))\b",
    re.I,
)
# "Like that from now on", "keep doing it this way": a rule that only points back at what was said
# or done before; without what it refers to it is no rule to keep.
_POINTER = re.compile(
    r"^(?:(?:i need|i want|keep|do|make) )?(?:it|that|this|them|things|everything)?\s*"
    r"(?:(?:to )?(?:be |stay |look |work |do it |doing it )?(?:like (?:that|this)|that way|this way|the same(?: way)?|"
    r"as (?:before|above|you did)))\s*(?:,\s*)?(?:from now on|going forward|always|every time|please)?[.!]?$",
    re.I,
)
POINTER_WORDS = 12  # a longer sentence says more than the pointer
_NO_SUBJECT = re.compile(r"^[-*•]?\s*((?:must|should|needs? to|has to|have to)\b.*)", re.I)


def _kind(s: str, memo: str) -> str | None:
    """STANDING, CANDIDATE or None (no convention) for a cleaned sentence."""
    if not s or len(s) > MAX_SENTENCE_CHARS:
        return None
    bare = _QUOTED.sub(" … ", s)  # a trigger inside quotation marks is someone else's words
    low = bare.lower().replace("’", "'")
    if s.rstrip().endswith(("?", "？")) or _QUESTION_START.match(low) or _QUESTION_ZH.search(bare):
        return None
    if _HYPOTHETICAL.match(low) or _THIRD_PARTY.search(low) or _NEAR_MISS.search(low) or _ONE_OFF.search(low):
        return None
    if re.search(r"\bwhether (?:we|to|i|or)\b", low):  # "we need to decide whether we use X": still open
        return None
    if len(low.split()) <= POINTER_WORDS and _POINTER.search(_STANDING.sub("", low).strip(" ,.!") + "."):
        return None
    if memo:
        if not (len(low.split()) >= 3 or len(low) >= 6):
            return None
        return STANDING if _KEEP_MEMO.match(memo) or _STANDING.search(low) else CANDIDATE
    general = re.search(rf"\b(?:{_GENERAL}|from now on|going forward)\b", low)
    if _REQUEST_START.match(low) and not general:
        # "commit after each task once the tests pass" holds; "verify X works in this repo" is a
        # task located in the repository, not a rule of it.
        if _STANDING.search(_IN_THIS.sub("", low)):
            return STANDING
        return CANDIDATE if _RULE_REQUEST.search(low) else None
    if any(t.search(low) for t in _TRIGGERS):
        return STANDING if _STANDING.search(low) or _WORK.search(low) or topics_of(low) - {"money"} else CANDIDATE
    return CANDIDATE if _RULE_REQUEST.search(low) else None


class Statement(NamedTuple):
    text: str  # the sentence as it should be stored
    standing: bool  # said as a rule that holds (a convention), else a candidate until confirmed


def convention_statements(prompt: str) -> list[Statement]:
    """The sentences of a user's prompt that state a convention, a rule or a decision of the
    project, in order, each as it should be stored (politeness and lead-ins dropped) with whether
    it was said as standing (see _STANDING) or is a candidate; [] when there is none."""
    if not isinstance(prompt, str):
        raise TypeError(f"prompt must be a string, got {type(prompt).__name__}")
    found: list[list] = []
    above = ""  # the line before: what a rule without its subject continues
    for line in _without_quotes(_users_text(prompt)).splitlines():
        previous = False  # the sentence before, on this line, was a convention
        for raw in _SENTENCE_END.split(line):
            s, memo = _clean(raw)
            kind = _kind(s, memo) if s else None
            bare = _NO_SUBJECT.match(s) if kind is not None and above else None
            if bare:
                # "- must be controlled by configuration" under "- generate summaries ...": the
                # rule is about the line above, stored with it so that it reads on its own.
                s = f"{above[:1].upper()}{above[1:]}: {bare.group(1)[:1].lower()}{bare.group(1)[1:]}"
            if kind is None:
                previous = False
                continue
            if previous and len(s.split()) <= FRAGMENT_WORDS and found:
                found[-1][0] = f"{found[-1][0]} {s}"  # "We use uv. Never pip.": one statement
                found[-1][1] = found[-1][1] or kind == STANDING
            else:
                found.append([s, kind == STANDING])
            previous = True
        above = line.strip().lstrip("-*• ").rstrip(" :.") if line.strip() else above
    seen: dict[str, Statement] = {}
    for text, standing in found:
        seen[text] = Statement(text, standing or (text in seen and seen[text].standing))
    return list(seen.values())


def conventions_in(prompt: str) -> list[str]:
    """The sentences of a user's prompt that state a convention or decision of the project
    (convention_statements, standing or candidate), in order; [] when there is none."""
    return [st.text for st in convention_statements(prompt)]


# What a convention is about, for prompts worded unlike it ("how do I add a dependency?" and
# "we install packages with uv"): the embedding model puts those far apart. A few subjects
# every codebase has conventions on, each with the words that name it; a convention and a
# prompt that name the same subject are about the same thing.
TOPICS: dict[str, tuple[str, ...]] = {
    "dependencies": (
        "dependency",
        "dependencies",
        "package",
        "packages",
        "pip",
        "uv",
        "poetry",
        "pipenv",
        "conda",
        "npm",
        "pnpm",
        "yarn",
        "requirements",
        "lockfile",
        "依赖",
        "安装包",
    ),
    "logging": ("log", "logs", "logging", "logger", "日志"),
    # Not "password" or "API key": a prompt names them about a form field as often as a secret.
    "secrets": ("secret", "secrets", "credential", "credentials", ".env", "密钥"),
    "commits": ("commit", "commits", "commit message", "commit messages", "提交信息"),
    "branches": ("branch", "branches", "rebase", "squash", "force-push", "分支"),
    "deploys": ("deploy", "deploys", "deploying", "deployment", "release", "releases", "部署", "发布"),
    "migrations": ("migration", "migrations", "迁移"),
    "formatting": (
        "format",
        "formatting",
        "formatter",
        "lint",
        "linter",
        "linting",
        "ruff",
        "black",
        "prettier",
        "eslint",
        "格式化",
    ),
    "tests": ("test", "tests", "testing", "pytest", "unittest", "jest", "vitest", "测试"),
    "money": ("money", "price", "prices", "amount", "amounts", "currency", "金额"),
}
_TOPIC_WORD = {w: t for t, words in TOPICS.items() for w in words}
_WORDS = re.compile(r"[a-z0-9][a-z0-9.+-]*[a-z0-9]|[a-z0-9]|\.env|[\u4e00-\u9fff]+")


def topics_of(text: str) -> set[str]:
    """The subjects of TOPICS a text names (words and two-word names, case aside; Chinese by
    substring)."""
    low = text.casefold()
    words = _WORDS.findall(low)
    found = {_TOPIC_WORD[w] for w in words if w in _TOPIC_WORD}
    found |= {_TOPIC_WORD[f"{a} {b}"] for a, b in pairwise(words) if f"{a} {b}" in _TOPIC_WORD}
    found |= {t for w, t in _TOPIC_WORD.items() if not w.isascii() and w in low}
    return found
