"""``cap fleet run`` on a real pseudo-terminal: the live view's rows and states, the
members' questions answered from the keyboard, an interrupt with a typed correction,
Ctrl-C; and the plain lines of --headless and of a stdout that is not a terminal.

The child is a real ``cap`` process whose controlling terminal is the pty (so Ctrl-C is
a real SIGINT from the terminal driver); what it draws is read through pyte, a terminal
emulator, so the assertions are about the screen a person sees."""

from __future__ import annotations

import fcntl
import os
import re
import struct
import sys
import termios
from pathlib import Path

import pyte
import trio

from tests.fleet.helpers import cap, copy_examples, events, worktree
from trio_cap.events.log import FileEventLog

ROOT = Path(__file__).resolve().parents[2]
ROWS, COLS = 40, 150
WAIT = 60
"""Seconds any one expectation may take (the fleets here finish in a few)."""


def _controlling_terminal() -> None:
    """In the child, after setsid: the pty on stdin becomes its controlling terminal."""
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


class Screen:
    """A child process on a pty, seen through a terminal emulator and typed into."""

    def __init__(self, master: int, slave: int, proc: trio.Process) -> None:
        self.master, self.slave, self.proc = master, slave, proc
        self.stream = trio.lowlevel.FdStream(master)
        self.screen = pyte.Screen(COLS, ROWS)
        self.feed = pyte.ByteStream(self.screen)
        self.raw = b""
        self.left: list | None = None

    @property
    def text(self) -> str:
        return "\n".join(line.rstrip() for line in self.screen.display)

    async def _read(self) -> bool:
        try:
            chunk = await self.stream.receive_some(65536)
        except (OSError, trio.BrokenResourceError):  # EIO: nobody has the terminal open
            chunk = b""
        if not chunk:
            return False
        self.raw += chunk
        self.feed.feed(chunk)
        return True

    async def expect(self, *texts: str) -> None:
        """Wait (bounded) until the screen shows every one of ``texts`` at once."""
        with trio.move_on_after(WAIT):
            while not all(t in self.text for t in texts):
                if not await self._read():
                    break
        missing = [t for t in texts if t not in self.text]
        assert not missing, f"{missing} never on the screen:\n{self.text}"

    def row(self, member: str) -> str:
        """The view's row of ``member`` (the line that starts with its number and id)."""
        for line in self.screen.display:
            cells = [cell.strip() for cell in line.split("│")]
            if len(cells) > 2 and cells[0].isdigit() and cells[1] == member:
                return " | ".join(cells)
        raise AssertionError(f"no row for {member}:\n{self.text}")

    async def type(self, text: str) -> None:
        await self.stream.send_all(text.encode())

    async def exit_code(self) -> int:
        """The child's exit code, once it has ended and everything it wrote is read: the
        terminal's modes as it left them are kept in :attr:`left`, then our end of the
        slave is closed, so the master reads to its end (EIO)."""
        with trio.fail_after(WAIT):
            code = await self.proc.wait()
            self.left = termios.tcgetattr(self.slave)
            self.close()
            while await self._read():
                pass
        return code

    def close(self) -> None:
        if self.slave >= 0:
            os.close(self.slave)
            self.slave = -1


async def run_on_terminal(tmp_path: Path, *args: str) -> Screen:
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLS, 0, 0))
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "NO_COLOR",
                                                            "FORCE_COLOR", "TERM")}
    env.update(PYTHONPATH=str(ROOT), TERM="xterm-256color")
    proc = await trio.lowlevel.open_process(
        [sys.executable, "-m", "trio_cap.actors.cli", "fleet", "run", *args], cwd=tmp_path,
        env=env, stdin=slave, stdout=slave, stderr=slave, start_new_session=True,
        preexec_fn=_controlling_terminal)
    return Screen(master, slave, proc)


def _fleet(tmp_path: Path, name: str, sessions: dict[str, str | None], extra: str = "",
           tail: str = "") -> Path:
    """A fleet file in ``tmp_path``: each session on trio-cap's scripted agent (inproc), with
    its script when one is given."""
    text = f'name = "{name}"\ntask = "Write the intro."\nworktrees = "dirs"\n{extra}\n'
    for member, script in sessions.items():
        text += f'[[session]]\nid = "{member}"\nbinding = "inproc"\n'
        if script is not None:
            (tmp_path / f"{member}.toml").write_text(script)
            text += f'script = "{member}.toml"\n'
    path = tmp_path / "fleet.toml"
    path.write_text(text + tail)
    return path


ASKING = """\
[[turn]]
steps = [ { write = "kept.txt", content = "yes\\n" }, { write = "skipped.txt", content = "no\\n" },
          { usage = { input_tokens = 1234, output_tokens = 56, cost_usd = 0.0125 } },
          { ask = "Colour?", options = ["red", "blue"] }, { say = "done" } ]
"""


async def test_each_members_row_and_its_questions_answered_from_the_keyboard(tmp_path):
    _fleet(tmp_path, "live", {"writer": ASKING, "helper": None}, 'permissions = "ask"')
    term = await run_on_terminal(tmp_path, "fleet.toml", "--log", "run.caplog")
    try:
        await term.expect("writer asks: allow Write kept.txt?", "y allow once")
        assert "needs input (permission" in term.row("writer")
        assert "inproc" in term.row("writer") and "Write the intro." in term.row("writer")
        await term.expect("fleet live: running")
        helper = term.row("helper")
        assert any(state in helper for state in ("idle", "working")), helper
        await term.type("y")
        await term.expect("writer asks: allow Write skipped.txt?")
        await term.type("n")
        await term.expect("writer asks: Colour?", "1 red 2 blue")
        assert "needs input (ask" in term.row("writer")
        await term.type("2")
        # the final frame whole: a read can land while the rows below the header are redrawn
        await term.expect("fleet live: completed", "$0.0125", "$0.0000")
        # the turn's usage (the scripted agent reports it with the turn, its own words'
        # tokens added to the script's): tokens in/out and the member's spend
        row = term.row("writer")
        tokens = re.search(r"\| (\d+)/(\d+) \|", row)
        assert tokens and int(tokens[1]) >= 1234 and int(tokens[2]) >= 56, row
        assert "$0.0125" in row and "$0.0000" in term.row("helper")
        assert await term.exit_code() == 0
    finally:
        term.close()
    assert "Traceback" not in term.raw.decode(errors="replace")
    assert "cap fleet: live completed" in term.text
    where = worktree(tmp_path, "writer")
    assert (where / "kept.txt").read_text() == "yes\n"
    assert not (where / "skipped.txt").exists()
    log = FileEventLog(tmp_path / "run.caplog", readonly=True)
    decided = [(e.event.decision, e.event.by) for e in events(log, "permission.decided",
                                                             "live.writer")]
    assert decided == [("allow_once", "human"), ("deny", "human")]
    (answered,) = events(log, "ask.answered", "live.writer")
    assert (answered.event.value, answered.event.by) == ("blue", "human")


async def test_an_ask_the_auto_answerer_passes_on_is_answered_from_the_keyboard(tmp_path):
    where = copy_examples(tmp_path)
    term = await run_on_terminal(where, "research.toml", "--log", "run.caplog")
    try:
        await term.expect("asker asks: What is the capital of France? (the auto-answerer "
                          "passed it on: no passage shares a word with the question)")
        await term.type("rParis\n")
        await term.expect("fleet research: completed")
        assert await term.exit_code() == 0
    finally:
        term.close()
    log = FileEventLog(where / "run.caplog", readonly=True)
    answers = [(e.event.value, e.event.by) for e in events(log, "ask.answered")]
    assert answers == [("postgresql", "policy:auto_answer"), ("Paris", "human")]


WRITER = """\
[[turn]]
steps = [ { say = "Draft: the first half" },
          { plan = [ { content = "drafting", status = "in_progress" } ] },
          { wait = 60 }, { say = "never said" } ]
[[turn]]
steps = [ { say = "Corrected draft" } ]
"""
PIPELINE = '[[route]]\npipeline = ["writer", "reviewer"]\n'


async def test_an_interrupt_and_a_correction_typed_in_the_view_reach_the_member(tmp_path):
    _fleet(tmp_path, "ix", {"writer": WRITER, "reviewer": None}, tail=PIPELINE)
    term = await run_on_terminal(tmp_path, "fleet.toml", "--log", "run.caplog")
    try:
        await term.expect("drafting")
        assert "working" in term.row("writer")
        await term.type("i")
        await term.expect("interrupt which member")
        await term.type("2\n")  # the reviewer is not in a turn: refused, and said so
        await term.expect("correction for reviewer")
        await term.type("hurry\n")
        await term.expect("cannot interrupt reviewer: not_working")
        await term.type("i")
        await term.type("writer\n")
        await term.expect("correction for writer")
        await term.type("British spelling, pleasx")
        await term.type("\x7fe\n")  # a backspace edits the line
        await term.expect("fleet ix: completed")
        assert await term.exit_code() == 0
    finally:
        term.close()
    log = FileEventLog(tmp_path / "run.caplog", readonly=True)
    said = [(e.event.member, e.event.correction, e.event.refused)
            for e in events(log, "fleet.interrupt")]
    assert said == [("reviewer", "hurry", "not_working"),
                    ("writer", "British spelling, please", None)]
    inputs = [e.event.text for e in events(log, "input.injected", "ix.writer")]
    assert len(inputs) == 2 and inputs[1].endswith("British spelling, please")
    reviewer = [e.event.text for e in events(log, "input.injected", "ix.reviewer")]
    assert reviewer == ["Result from writer:\nCorrected draft"]


async def test_ctrl_c_closes_the_fleet_restores_the_terminal_and_says_one_line(tmp_path):
    _fleet(tmp_path, "stop", {"writer": WRITER, "reviewer": None}, tail=PIPELINE)
    term = await run_on_terminal(tmp_path, "fleet.toml", "--log", "run.caplog")
    try:
        before = termios.tcgetattr(term.slave)
        await term.expect("drafting")
        during = termios.tcgetattr(term.slave)
        assert not during[3] & termios.ICANON and not during[3] & termios.ECHO  # cbreak
        await term.type("\x03")
        code = await term.exit_code()
    finally:
        term.close()
    assert code == 130
    assert term.left == before
    assert not term.screen.cursor.hidden
    assert "fleet stop: failed: stopped before it finished" in term.text  # the last picture
    assert "failed" in term.row("writer") and "done" in term.row("reviewer")
    shown = term.raw.decode(errors="replace")
    assert "Traceback" not in shown
    assert [line for line in term.text.splitlines() if line.startswith("cap:")] == [
        "cap: interrupted"]
    log = FileEventLog(tmp_path / "run.caplog", readonly=True)
    (failed,) = events(log, "fleet.failed")
    assert failed.event.reason == "stopped before it finished"
    ended = {e.stream for e in log.read(1) if e.kind in ("session.completed",
                                                         "session.failed",
                                                         "session.cancelled")}
    assert ended == {"stop.writer", "stop.reviewer"}


async def test_two_members_changing_one_file_is_a_warning_in_the_view(tmp_path):
    where = copy_examples(tmp_path)
    term = await run_on_terminal(where, "fan_out_join.toml", "--log", "run.caplog")
    try:
        await term.expect("fleet fanout: completed")
        assert await term.exit_code() == 0
    finally:
        term.close()
    log = FileEventLog(where / "run.caplog", readonly=True)
    (conflict,) = events(log, "fleet.conflict")
    assert f"⚠ conflict: hello.txt changed by {', '.join(conflict.event.members)}" in term.text
    assert "spent $0.0000 of $1.0000" in term.text  # the fleet's budget, with its bar
    assert [term.row(m).split(" | ")[2] for m in ("lead", "en", "fr")] == ["done"] * 3


async def test_headless_on_a_terminal_prints_plain_lines_and_asks_nobody(tmp_path):
    _fleet(tmp_path, "plain", {"writer": ASKING}, 'permissions = "ask"')
    term = await run_on_terminal(tmp_path, "fleet.toml", "--log", "run.caplog", "--headless")
    try:
        assert await term.exit_code() == 0
    finally:
        term.close()
    shown = term.raw.decode(errors="replace")
    assert "fleet.started" in shown and "fleet plain: 1 sessions (writer)" in shown
    assert "asks:" not in shown and "keys:" not in shown
    log = FileEventLog(tmp_path / "run.caplog", readonly=True)
    assert [e.event.by for e in events(log, "permission.decided", "plain.writer")] == [
        "policy:ask", "policy:ask"]
    (answered,) = events(log, "ask.answered", "plain.writer")
    assert (answered.event.value, answered.event.by) == (None, "policy:headless")


def test_stdout_not_a_terminal_prints_plain_lines(tmp_path):
    _fleet(tmp_path, "pipe", {"writer": ASKING}, 'permissions = "ask"')
    done = cap("fleet", "run", "fleet.toml", "--log", "run.caplog", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "fleet pipe: 1 sessions (writer)" in done.stdout
    assert "\x1b[" not in done.stdout  # no cursor movement, no colour
    assert done.stderr.splitlines()[-1].startswith("cap fleet: pipe completed")
