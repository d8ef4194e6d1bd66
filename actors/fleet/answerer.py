"""The research auto-answerer: a member's ``cap.ask_user`` answered from a folder of markdown
files, ranked with BM25 (``bm25s``), or passed on with the reason it was not.

Pure: the archive comes in as text (:mod:`answer_shell` reads the files), the index is built
once, and :func:`answer` is a function of the index and the ask, so the session machine can
consult it inside a step (:class:`~trio_cap.actors.session.policy.AutoAnswer`) and a replay
can put the logged answer in its place.

Rules (in this order):

* FORM    an ask whose form has several fields, or wants a yes/no or a number, is passed
          on: a passage of prose cannot fill it.
* TEXT    a free-text ask is searched with its prompt; the passages scoring at least the
          threshold (at most ``max_passages``, best first) are the answer, joined by blank
          lines.
* OPTIONS an ask with options (``oneOf`` consts, or ``enum``) is answered only with one
          of them: each option is scored by the best passage that names it, searched with
          the prompt and the option; the best option wins if it clears the threshold and
          beats every other one (a tie, or no passage naming any option, is passed on).
* WHY     either way the ``_meta`` says so: ``cap.provenance`` (file, passage number,
          first line, heading, score, excerpt, per passage used) with an answer; ``cap.auto_answer``
          (``escalated``, ``reason``, ``best_score``, ``threshold``) when passed on.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

import attrs

from trio_cap.actors.session.policy import Answerer, AutoAnswer
from trio_cap.events.kinds import AskUser

if TYPE_CHECKING:
    import bm25s

PROVENANCE = "cap.provenance"
AUTO_ANSWER_META = "cap.auto_answer"
DEFAULT_ARCHIVE = "docs/research/"
DEFAULT_THRESHOLD = 3.0
"""A raw BM25 score: about two uncommon words of the question found in one passage."""
DEFAULT_MAX_PASSAGES = 3
EXCERPT = 240
"""Characters of a passage quoted in its provenance."""

_FENCE = re.compile(r"^\s*(```|~~~)")
_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(?P<title>.*?)\s*#*\s*$")


@attrs.frozen
class Passage:
    file: str
    """Relative to the archive folder, with ``/`` separators."""
    index: int
    """1-based, in file order."""
    line: int
    """1-based line of the file where it starts."""
    heading: str
    text: str


@attrs.frozen
class Hit:
    passage: Passage
    score: float

    def provenance(self) -> dict[str, Any]:
        p = self.passage
        excerpt = p.text if len(p.text) <= EXCERPT else p.text[:EXCERPT - 1] + "…"
        return {"file": p.file, "passage": p.index, "line": p.line, "heading": p.heading,
                "score": self.score, "excerpt": excerpt}


def split_markdown(name: str, text: str) -> list[Passage]:
    """Paragraphs (code fences kept whole), each under the heading it sits in: a paragraph is
    the unit an answer can quote without dragging in unrelated text."""
    out: list[Passage] = []
    heading = ""
    block: list[str] = []
    start = 0
    fenced = False

    def flush() -> None:
        body = "\n".join(block).strip()
        if body:
            out.append(Passage(name, len(out) + 1, start, heading, body))
        block.clear()

    for number, line in enumerate(text.splitlines(), 1):
        if _FENCE.match(line):
            if not block:
                start = number
            block.append(line)
            fenced = not fenced
            continue
        if fenced:
            block.append(line)
            continue
        if (m := _HEADING.match(line)) is not None:
            flush()
            heading = m["title"]
            continue
        if not line.strip():
            flush()
            continue
        if not block:
            start = number
        block.append(line)
    flush()
    return out


def _tokens(texts: Sequence[str]) -> list[list[str]]:
    import bm25s  # numpy comes with it: only fleets that answer pay for the import

    return bm25s.tokenize(list(texts), stopwords="english", return_ids=False,  # type: ignore[return-value]
                          show_progress=False)


class Archive:
    """The passages of an archive and their BM25 index; built once per fleet run."""

    def __init__(self, passages: Iterable[Passage]) -> None:
        self.passages = tuple(passages)
        self.files = len({p.file for p in self.passages})
        tokens = _tokens([f"{p.heading}\n{p.text}" for p in self.passages])
        self._words = [frozenset(t) for t in tokens]
        self._index: bm25s.BM25 | None = None
        if self.passages:
            import bm25s

            self._index = bm25s.BM25()
            self._index.index(tokens, show_progress=False)

    @classmethod
    def from_texts(cls, files: Mapping[str, str]) -> Archive:
        """``files``: relative name → markdown text; names are taken in sorted order so the
        same folder always numbers its passages the same way."""
        return cls(p for name in sorted(files) for p in split_markdown(name, files[name]))

    def scores(self, words: Sequence[str]) -> list[float]:
        if self._index is None or not words:
            return [0.0] * len(self.passages)
        return [round(float(s), 4) for s in self._index.get_scores(list(words))]

    def search(self, query: str, k: int) -> list[Hit]:
        """The ``k`` best passages with a score above zero, best first (ties in file order)."""
        scores = self.scores(_tokens([query])[0])
        ranked = sorted(range(len(scores)), key=lambda i: (-scores[i], i))
        return [Hit(self.passages[i], scores[i]) for i in ranked[:k] if scores[i] > 0]

    def naming(self, words: Sequence[str]) -> list[int]:
        """Indexes of the passages that contain any of ``words``."""
        wanted = set(words)
        return [i for i, have in enumerate(self._words) if have & wanted]


def options(form: Mapping[str, Any] | None) -> list[tuple[Any, str]] | None:
    """(value, label) of each option an ask offers, or None for a free-text ask."""
    if not form:
        return None
    choices = form.get("oneOf")
    if isinstance(choices, list):
        return [(c["const"], str(c.get("title") or c["const"])) for c in choices
                if isinstance(c, dict) and "const" in c]
    if isinstance(form.get("enum"), list):
        return [(v, str(v)) for v in form["enum"]]
    return None


def answer(archive: Archive, ask: AskUser, *, threshold: float = DEFAULT_THRESHOLD,
           max_passages: int = DEFAULT_MAX_PASSAGES) -> AutoAnswer:
    """The archive's answer to ``ask``, or why it has none (see the rules above)."""
    form = ask.form or {}
    offered = options(form)
    if offered is None and (form.get("properties") is not None
                            or form.get("type") not in (None, "string")):
        return _escalate("the form asks for more than text", None, threshold)
    if offered is not None:
        return _choose(archive, ask.prompt, offered, threshold, max_passages)
    hits = archive.search(ask.prompt, max_passages)
    best = hits[0].score if hits else None
    used = [h for h in hits if h.score >= threshold]
    if not used:
        why = ("no passage shares a word with the question" if best is None else
               f"the best passage ({hits[0].passage.file} #{hits[0].passage.index}) "
               f"scores {best:g}, under the threshold {threshold:g}")
        return _escalate(why, best, threshold)
    value = "\n\n".join(h.passage.text for h in used)
    return AutoAnswer(value, {PROVENANCE: [h.provenance() for h in used]})


def _choose(archive: Archive, prompt: str, offered: list[tuple[Any, str]], threshold: float,
            max_passages: int) -> AutoAnswer:
    if not offered:
        return _escalate("the ask offers no options", None, threshold)
    question = _tokens([prompt])[0]
    ranked: list[tuple[float, int, list[Hit]]] = []
    for n, (_value, label) in enumerate(offered):
        words = _tokens([label])[0]
        scores = archive.scores(question + words)
        hits = sorted((Hit(archive.passages[i], scores[i]) for i in archive.naming(words)),
                      key=lambda h: -h.score)
        ranked.append((hits[0].score if hits else 0.0, n, hits))
    ranked.sort(key=lambda r: (-r[0], r[1]))
    best, n, hits = ranked[0]
    runner_up = ranked[1][0] if len(ranked) > 1 else 0.0
    if best <= 0:
        return _escalate("no passage names any of the options", None, threshold)
    label = offered[n][1]
    if best < threshold:
        return _escalate(f"the best option, {label!r}, scores {best:g}, under the threshold "
                         f"{threshold:g}", best, threshold)
    if best == runner_up:
        return _escalate(f"the archive supports {label!r} and {offered[ranked[1][1]][1]!r} "
                         f"equally ({best:g})", best, threshold)
    used = [h for h in hits if h.score >= threshold][:max_passages]
    return AutoAnswer(offered[n][0], {PROVENANCE: [h.provenance() for h in used]})


def _escalate(reason: str, best: float | None, threshold: float) -> AutoAnswer:
    return AutoAnswer(None, {AUTO_ANSWER_META: {"escalated": True, "reason": reason,
                                                "best_score": best, "threshold": threshold}})


def answerer(archive: Archive, *, threshold: float = DEFAULT_THRESHOLD,
             max_passages: int = DEFAULT_MAX_PASSAGES) -> Answerer:
    """What a session machine consults: :func:`answer` bound to one archive."""
    return partial(answer, archive, threshold=threshold, max_passages=max_passages)
