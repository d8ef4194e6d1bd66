"""The research auto-answerer: BM25 over a fixture archive, pure, then a fleet run of the
scripted agent whose asks it answers (with provenance in the log) or passes on."""

from __future__ import annotations

import msgspec
import trio

from tests.fleet.helpers import EXAMPLES, cap, copy_examples, events, run_file, run_with_person
from trio_cap.actors.fleet import load_fleet
from trio_cap.actors.fleet.answer_shell import read_archive
from trio_cap.actors.fleet.answerer import AUTO_ANSWER_META, PROVENANCE, answer, split_markdown
from trio_cap.actors.ids import SequentialIds
from trio_cap.actors.orchestrator import open_orchestrator
from trio_cap.actors.replay.check import check_sessions, group_sessions
from trio_cap.actors.session.machine import AUTO_ANSWER
from trio_cap.events.kinds import AskUser
from trio_cap.events.replay import replay

RESEARCH = EXAMPLES / "research"
DATABASE = "Which database do the nodes share the log in?"
FRANCE = "What is the capital of France?"


def _options(*names: str) -> dict:
    return {"type": "string", "oneOf": [{"const": n, "title": n} for n in names]}


def test_markdown_splits_into_paragraphs_under_their_headings_with_fences_whole():
    text = ("# Top\n\nfirst para\nstill first\n\n## Sub\nsecond\n\n```\ncode\n\nmore code\n```\n")
    got = [(p.index, p.line, p.heading, p.text) for p in split_markdown("a.md", text)]
    assert got == [(1, 3, "Top", "first para\nstill first"), (2, 7, "Sub", "second"),
                   (3, 9, "Sub", "```\ncode\n\nmore code\n```")]


def test_a_free_text_ask_is_answered_from_the_best_passages_with_their_provenance():
    archive = read_archive(RESEARCH)
    got = answer(archive, AskUser(ask_id="q", prompt=DATABASE), threshold=2.5, max_passages=2)
    assert got.value.startswith("When several orchestrator nodes share one log")
    (used,) = got.meta[PROVENANCE]  # the only passage over the threshold
    assert (used["file"], used["passage"], used["line"]) == ("storage/event-log.md", 2, 8)
    assert used["heading"] == "Which database for many nodes" and used["score"] >= 2.5


def test_an_options_ask_gets_the_option_the_archive_names():
    archive = read_archive(RESEARCH)
    ask = AskUser(ask_id="q", prompt=DATABASE, form=_options("sqlite", "postgresql"))
    got = answer(archive, ask, threshold=2.5)
    assert got.value == "postgresql"
    assert [(p["file"], p["passage"]) for p in got.meta[PROVENANCE]] == [
        ("storage/event-log.md", 2)]


def test_questions_the_archive_cannot_answer_are_passed_on_with_the_reason():
    archive = read_archive(RESEARCH)
    cases = [
        (AskUser(ask_id="q", prompt=FRANCE), "no passage shares a word with the question"),
        (AskUser(ask_id="q", prompt="What colour is the logo?", form=_options("red", "blue")),
         "no passage names any of the options"),
        (AskUser(ask_id="q", prompt=DATABASE), "under the threshold 9"),
        (AskUser(ask_id="q", prompt="How is a record framed?",
                 form=_options("msgpack", "crc32")), "equally"),  # one passage names both
        (AskUser(ask_id="q", prompt="Proceed?", form={"type": "boolean"}),
         "the form asks for more than text"),
    ]
    for ask, why in cases:
        got = answer(archive, ask, threshold=9.0 if "threshold" in why else 1.0)
        assert got.value is None, ask
        assert got.meta[AUTO_ANSWER_META]["escalated"] is True
        assert why in got.meta[AUTO_ANSWER_META]["reason"], got.meta


def test_the_same_folder_gives_the_same_answers():
    ask = AskUser(ask_id="q", prompt=DATABASE)
    assert answer(read_archive(RESEARCH), ask, threshold=1.0) == answer(
        read_archive(RESEARCH), ask, threshold=1.0)


async def test_a_fleet_member_is_answered_from_the_archive_and_the_rest_passed_on(tmp_path):
    path = tmp_path / "fleet.toml"
    path.write_text(
        f'name = "aa"\nworktrees = "dirs"\n'
        f'task = """ask: {DATABASE} [sqlite|postgresql]\nask: {DATABASE}\nask: {FRANCE}"""\n'
        f'[auto_answer]\narchive = "{RESEARCH}"\nthreshold = 2.5\nmax_passages = 2\n'
        '[[session]]\nid = "asker"\nbinding = "inproc"\n'
        '[[session]]\nid = "quiet"\nbinding = "inproc"\nauto_answer = false\n')
    outcome, log, live = await run_file(path)
    assert outcome.completed, outcome.reason
    (archive,) = events(log, "fleet.archive", "fleet:aa")
    assert (archive.event.files, archive.event.threshold) == (3, 2.5)
    created = {e.stream: e.event.auto_answer for e in events(log, "session.created")}
    assert created == {"aa.asker": True, "aa.quiet": False}

    answers = [e.event for e in events(log, "ask.answered", "aa.asker")]
    assert [(a.value is not None, a.by) for a in answers] == [
        (True, AUTO_ANSWER), (True, AUTO_ANSWER), (False, "policy:headless")]
    assert answers[0].value == "postgresql"
    assert answers[1].value.startswith("When several orchestrator nodes share one log")
    for a in answers[:2]:
        assert [(p["file"], p["passage"]) for p in a.meta[PROVENANCE]] == [
            ("storage/event-log.md", 2)]
    assert "no passage shares a word" in answers[2].meta[AUTO_ANSWER_META]["reason"]
    # the agent got the answer with its provenance
    sent = [e.event for e in events(log, "cap.ask_user.answer", "aa.asker")]
    assert sent[0].value == "postgresql" and sent[0].meta == answers[0].meta
    said = "".join(e.event.text for e in events(log, "cap.text_chunk", "aa.asker"))
    assert "You answered postgresql." in said
    # the member that opted out is declined as before, with no answerer's reason
    quiet = [e.event for e in events(log, "ask.answered", "aa.quiet")]
    assert [(a.value, a.by, a.meta) for a in quiet] == [(None, "policy:headless", None)] * 3

    view = live.fleets["aa"]
    asks = [(a.member, a.state, a.by) for a in view.asks if a.member == "asker"]
    assert asks == [("asker", "answered", AUTO_ANSWER)] * 2 + [
        ("asker", "declined", "policy:headless")]
    # the two members ask concurrently: the asker's first ask, not the view's first
    first = next(a for a in view.asks if a.member == "asker")
    assert first.provenance[0]["file"] == "storage/event-log.md"
    audit = [r.detail for r in view.audit if r.source == "auto_answer"]
    assert audit[0].startswith("storage/event-log.md #2 score ")
    assert audit[2].startswith("escalated and declined (nobody can be asked): no passage")

    rebuilt = replay(log).fleets
    assert msgspec.to_builtins(rebuilt) == msgspec.to_builtins(live)
    checked = check_sessions(group_sessions([list(log.read(1))]))
    assert checked.sessions == 2
    log.close()


async def test_the_example_answers_from_its_archive_and_declines_the_rest(tmp_path):
    outcome, log, live = await run_file(copy_examples(tmp_path) / "research.toml")
    assert outcome.completed, outcome.reason
    answers = [e.event for e in events(log, "ask.answered", "research.asker")]
    assert [(a.value, a.by) for a in answers] == [("postgresql", AUTO_ANSWER),
                                                  (None, "policy:headless")]
    assert answers[0].meta[PROVENANCE][0]["file"] == "storage/event-log.md"
    assert [(a.state, a.escalated != "") for a in live.fleets["research"].asks] == [
        ("answered", False), ("declined", True)]
    log.close()
    shown = cap("fleet", "status", str(tmp_path / "fleets" / "research.caplog"))
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.splitlines()[-2:] == [
        '  ask asker ask_1: answered from the archive (storage/event-log.md #2): "postgresql"',
        "  ask asker ask_2: declined (auto-answerer: no passage shares a word with the "
        "question)"]


async def test_an_ask_the_archive_cannot_answer_goes_to_the_person_present(tmp_path):
    path = tmp_path / "fleet.toml"
    path.write_text(
        f'name = "hu"\nworktrees = "dirs"\ntask = "ask: {FRANCE} [paris|rome]"\n'
        f'[auto_answer]\narchive = "{RESEARCH}"\nthreshold = 2.5\n'
        '[[session]]\nid = "asker"\nbinding = "inproc"\n')

    def escalated(state):
        view = state.fleets.fleets.get("hu")
        return next((a for a in view.asks if a.escalated and a.state == "pending"), None) \
            if view is not None else None

    async def answer(state) -> None:
        ask = escalated(state)
        assert "no passage names any of the options" in ask.escalated
        await orch.session("hu.asker").answer(ask.ask_id, "paris")

    async with open_orchestrator(tmp_path / "run.caplog", ids=SequentialIds()) as orch:
        with trio.fail_after(60):
            outcome = await run_with_person(orch, load_fleet(path),
                                            lambda s: escalated(s) is not None, answer)
        assert outcome.completed, outcome.reason
        needed = [e.event for e in orch.log.read(1, "hu.asker")
                  if e.kind == "session.input_required"]
        assert needed[0].meta[AUTO_ANSWER_META]["escalated"] is True
        answers = [(e.event.value, e.event.by) for e in orch.log.read(1, "hu.asker")
                   if e.kind == "ask.answered"]
        assert answers == [("paris", "human")]
        said = "".join(e.event.text for e in orch.log.read(1, "hu.asker")
                       if e.kind == "cap.text_chunk")
        assert "You answered paris." in said


def test_log_lines_say_where_an_answer_came_from_and_why_an_ask_was_passed_on():
    from trio_cap.actors.cli.render import describe
    from trio_cap.events.kinds import AskAnswered, SessionInputRequired

    used = {PROVENANCE: [{"file": "a.md", "passage": 2, "score": 3.1}]}
    why = {AUTO_ANSWER_META: {"escalated": True, "reason": "no passage names any option"}}
    assert describe(AskAnswered(ask_id="ask_1", value="b", by=AUTO_ANSWER, meta=used)) == (
        'ask ask_1 answered by policy:auto_answer: "b" (from a.md #2 score 3.1)')
    assert describe(AskAnswered(ask_id="ask_1", by="policy:headless", meta=why)) == (
        "ask ask_1: no answer (nobody can be asked: headless); the auto-answerer passed it "
        "on: no passage names any option")
    assert describe(SessionInputRequired(turn=1, reason="ask", ref="ask_1", meta=why)) == (
        "waiting on ask ask_1; the auto-answerer passed it on: no passage names any option")


async def test_fleet_status_says_when_the_log_it_read_is_damaged(tmp_path):
    # it printed the status of what it could read and exited 0, as if nothing were missing
    outcome, log, _ = await run_file(copy_examples(tmp_path) / "research.toml")
    assert outcome.completed, outcome.reason
    log.close()
    path = tmp_path / "fleets" / "research.caplog"
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF  # one byte of one record in the middle
    path.write_bytes(bytes(data))
    shown = cap("fleet", "status", str(path))
    assert shown.returncode == 2, shown.stderr
    assert "Traceback" not in shown.stderr
    last = shown.stderr.strip().splitlines()[-1]
    assert "is damaged" in last and "cap log repair" in last
    assert shown.stdout.startswith("fleet research:")  # what was readable is still shown
