"""`cap run` on a real pseudo-terminal: the ask policy is the default and a human answers."""

import os
import sys
from pathlib import Path

import trio

ROOT = Path(__file__).resolve().parents[2]


class Terminal:
    """A child process on a pty, read and typed into like a person would."""

    def __init__(self, master: int) -> None:
        self.stream = trio.lowlevel.FdStream(master)
        self.screen = b""

    async def expect(self, text: bytes) -> None:
        with trio.fail_after(30):
            while text not in self.screen:
                try:
                    chunk = await self.stream.receive_some(4096)
                except OSError:  # EIO: the child closed the terminal
                    chunk = b""
                if not chunk:
                    raise AssertionError(f"{text!r} never appeared in:\n{self.screen.decode()}")
                self.screen += chunk

    async def type(self, text: str) -> None:
        await self.stream.send_all(text.encode())


async def run_on_terminal(tmp_path, *args):
    master, slave = os.openpty()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TERM": "dumb"}
    proc = await trio.lowlevel.open_process(
        [sys.executable, "-m", "trio_cap.actors.cli", "run", *args], cwd=tmp_path, env=env,
        stdin=slave, stdout=slave, stderr=slave, start_new_session=True,
    )
    os.close(slave)
    return proc, Terminal(master)


async def test_with_a_terminal_the_human_is_asked_and_their_answers_are_logged(tmp_path):
    proc, term = await run_on_terminal(
        tmp_path, "--log", "t.caplog",
        "--task", "write kept.txt: yes\nwrite skipped.txt: no\nask: Colour? [red|blue]",
    )
    await term.expect(b"Allow Write kept.txt? [y]es once / [a]lways / [n]o: ")
    await term.type("y\n")
    await term.expect(b"Allow Write skipped.txt?")
    await term.type("n\n")
    await term.expect(b"Colour? [red|blue]: ")
    await term.type("green\n")
    await term.expect(b"please answer one of: red, blue")
    await term.type("blue\n")
    await term.expect(b"completed after 1 turn(s)")
    with trio.fail_after(30):
        assert await proc.wait() == 0
    assert (tmp_path / "kept.txt").read_text() == "yes\n"
    assert not (tmp_path / "skipped.txt").exists()
    shown = await trio.run_process(
        [sys.executable, "-m", "trio_cap.actors.cli", "log", "show", "t.caplog"], cwd=tmp_path,
        capture_stdout=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    text = shown.stdout.decode()
    assert "permissions ask" in text
    assert "allow_once by human" in text and "deny by human" in text
    assert 'answered by human: "blue"' in text
