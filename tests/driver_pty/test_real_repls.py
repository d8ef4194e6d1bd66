"""The PTY connector against real programs under a real pseudo-terminal: bash and Python.

``bash --norc --noprofile -i`` runs with the known prompt ``tcap$`` (PS1 from the
environment) and ``python3 -i -q`` with its own ``>>>``; each test waits on
what the connector delivered (events, turn ends), never on time.
"""

from __future__ import annotations

import base64
import os
import signal
from pathlib import Path

import pytest
import trio

from tests.driver_pty.ptylib import PS1, WAIT, bash, driven, inject, manifest, python
from trio_cap.actors.bindings.base import ToAgent
from trio_cap.actors.bindings.process import live_groups
from trio_cap.actors.bindings.pty.connector import PtyConnector, replay, settings_for
from trio_cap.actors.bindings.pty.ptyproc import spawn_pty
from trio_cap.actors.connection import AgentSpec, ConnectError
from trio_cap.actors.ids import SequentialIds
from trio_cap.events.kinds import CapError, CapSessionReady, PtyRawBytes, SessionConfig


async def test_bash_ready_then_several_turns(tmp_path: Path) -> None:
    async with driven(bash(), tmp_path) as d:
        assert d.of(CapSessionReady)  # open returns only once the prompt has settled
        text, end = await d.turn("echo hello $((6*7))")
        assert (text, end.stop_reason) == ("hello 42\n", "end_turn")
        text, _ = await d.turn("printf 'a\\nb\\n\\nc\\n'")
        assert text == "a\nb\n\nc\n"  # blank lines inside the output stay, the prompt does not
        text, _ = await d.turn("cd / && pwd")
        assert text == "/\n"
        assert not d.of(CapError)


async def test_bash_multi_line_input_goes_as_one_bracketed_paste(tmp_path: Path) -> None:
    record: list = []
    async with driven(bash(paste=True), tmp_path, options={"pty.record": record}) as d:
        assert d.conn.machine.screen.paste_mode  # bash's readline switched mode 2004 on
        text, _ = await d.turn("for i in 1 2 3\ndo echo item-$i\ndone")
        assert text == "item-1\nitem-2\nitem-3\n"
    typed = [out.data for out in replay(settings_for(bash(paste=True)), record,
                                        new_id=SequentialIds().new)
             if isinstance(out, ToAgent)]
    assert b"\x1b[200~for i in 1 2 3\rdo echo item-$i\rdone\x1b[201~" in typed  # one write


async def test_bash_without_paste_types_each_line(tmp_path: Path) -> None:
    async with driven(bash(paste=False), tmp_path) as d:
        text, _ = await d.turn("echo one\necho two")
        assert "one\n" in text and "two\n" in text


async def test_ctrl_c_cancels_a_long_running_command(tmp_path: Path) -> None:
    async with driven(bash(), tmp_path) as d:
        await d.start("echo started; sleep 1000", "started")
        assert (await d.cancel_turn()).stop_reason == "cancelled"
        text, end = await d.turn("echo after")  # the shell is usable again
        assert (text, end.stop_reason) == ("after\n", "end_turn")


async def test_bash_exiting_mid_turn_is_pty_died_with_its_code(tmp_path: Path) -> None:
    async with driven(bash(), tmp_path) as d:
        await d.conn.send([inject("echo bye; exit 3")])
        await d.until(lambda: d.gone, "the agent to be gone")
    died = [e for e in d.of(CapError) if e.code == "pty_died"]
    assert len(died) == 1 and died[0].details == {"exit_code": 3}
    assert "exited with code 3" in d.gone[0].reason and d.gone[0].exit_code == 3
    # the error comes before the session learns the agent is gone, and the last text too
    assert "bye\n" in d.text_since(0)
    assert d.items.index(d.gone[0]) > max(
        i for i, item in enumerate(d.items) if getattr(item, "events", None))


async def test_a_killed_program_is_pty_died_with_the_signal(tmp_path: Path) -> None:
    async with driven(bash(), tmp_path) as d:
        await d.conn.send([inject("kill -9 $$")])
        await d.until(lambda: d.gone, "the agent to be gone")
    (died,) = [e for e in d.of(CapError) if e.code == "pty_died"]
    assert died.details == {"signal": int(signal.SIGKILL)}
    assert "SIGKILL" in died.message


async def test_python_ready_turns_and_a_block(tmp_path: Path) -> None:
    async with driven(python(), tmp_path) as d:
        text, _ = await d.turn("print(6*7)")
        assert text == "42\n"
        text, _ = await d.turn("for i in range(3):\n    print('n', i)\n\n")
        assert text == "n 0\nn 1\nn 2\n"  # the echo and its "..." continuation rows are gone
        text, _ = await d.turn("1/0")
        assert "ZeroDivisionError" in text


async def test_python_ctrl_c_and_exit_mid_turn(tmp_path: Path) -> None:
    async with driven(python(), tmp_path) as d:
        start = await d.start("import time; print('go'); time.sleep(1000)", "go")
        assert (await d.cancel_turn()).stop_reason == "cancelled"
        assert "KeyboardInterrupt" in d.text_since(start)
        await d.conn.send([inject("import os; os._exit(4)")])
        await d.until(lambda: d.gone, "python to be gone")
    (died,) = [e for e in d.of(CapError) if e.code == "pty_died"]
    assert died.details == {"exit_code": 4}


async def test_error_lines_become_cap_errors(tmp_path: Path) -> None:
    m = bash(parse={"error_lines": ["^bash: .*: command not found$"]})
    async with driven(m, tmp_path) as d:
        text, _ = await d.turn("no-such-command-xyz")
        assert "command not found" in text
    (err,) = d.of(CapError)
    assert err.code == "agent_error" and "no-such-command-xyz" in err.message


async def test_cancel_none_is_refused_and_hard_kills(tmp_path: Path) -> None:
    async with driven(bash(cancel="none"), tmp_path) as d:
        await d.conn.send([inject("echo x; sleep 1000")])
        await d.until(lambda: "x" in d.text_since(0), "the command")
        await d.conn.cancel("current_turn")
        await d.until(lambda: d.of(CapError), "the refusal")
        assert d.of(CapError)[0].code == "cap_cancel_unsupported"
        assert not d.turn_ends
    async with driven(bash(cancel="hard"), tmp_path) as d:
        await d.conn.send([inject("echo y; sleep 1000")])
        await d.until(lambda: "y" in d.text_since(0), "the command")
        await d.conn.cancel("current_turn")
        await d.until(lambda: d.gone, "the kill")
        assert d.gone[0].reason.startswith("hard cancel")
        assert not [e for e in d.of(CapError) if e.code == "pty_died"]  # we ended it


async def test_raw_bytes_only_when_opted_in(tmp_path: Path) -> None:
    async with driven(bash(), tmp_path) as d:
        await d.turn("echo plain")
    assert not d.of(PtyRawBytes)
    async with driven(bash(), tmp_path, options={"pty.raw_bytes": True}) as d:
        await d.turn("echo raw")
    raw = b"".join(base64.b64decode(e.bytes_b64) for e in d.of(PtyRawBytes))
    assert b"raw" in raw and PS1.strip().encode() in raw


async def test_never_ready_is_a_clear_error_after_the_timeout(tmp_path: Path) -> None:
    m = manifest("quiet", ["cat"], ready="^never-shown$", idle=["^>$"], init_timeout=1)
    with pytest.raises(ConnectError, match=r"did not become ready within 1 s .*ready_when"):
        async with driven(m, tmp_path):
            pass
    assert not live_groups()


async def test_exit_before_ready_says_how(tmp_path: Path) -> None:
    m = manifest("quits", ["sh", "-c", "echo going away; exit 7"], ready="^never$",
                 idle=["^>$"], init_timeout=30)
    with pytest.raises(ConnectError, match=r"ended before it was ready: .*code 7.*going away"):
        async with driven(m, tmp_path):
            pass


async def test_a_missing_program_is_one_line(tmp_path: Path) -> None:
    m = manifest("missing", ["/nonexistent/prog"], ready="x", idle=["^>$"])
    with pytest.raises(ConnectError, match="cannot start '/nonexistent/prog': program not found"):
        async with driven(m, tmp_path):
            pass


async def test_a_dialog_before_ready_is_never_answered(tmp_path: Path) -> None:
    script = "printf 'Do you trust the files in this folder?\\n1. Yes\\n2. No\\n'; read x; " \
             "echo typed:$x; sleep 1000"
    m = manifest("dialog", ["sh", "-c", script], ready=r"\S", idle=["^>$"], init_timeout=2)
    with pytest.raises(ConnectError, match="shows a dialog trio-cap will not answer"):
        async with driven(m, tmp_path):
            pass


async def test_the_child_gets_a_controlling_tty_and_the_window_size(tmp_path: Path) -> None:
    m = bash(pty={"cols": 91, "rows": 27})
    async with driven(m, tmp_path) as d:
        text, _ = await d.turn("stty size; tty; echo $TERM")
        assert text.splitlines()[0] == "27 91"
        assert text.splitlines()[1].startswith("/dev/pts/")
        assert text.splitlines()[2] == "xterm-256color"
        await d.conn.resize(110, 33)
        text, _ = await d.turn("stty size")
        assert text == "33 110\n"


async def test_leaving_kills_the_whole_group_even_with_background_jobs(tmp_path: Path) -> None:
    async with driven(bash(), tmp_path) as d:
        text, _ = await d.turn("sleep 1000 & echo $!")
        child = int(text.split()[-1])
        pgid = d.conn.pty.pid
    assert not live_groups()
    with pytest.raises(ProcessLookupError):
        os.killpg(pgid, 0)
    with trio.fail_after(WAIT):  # SIGKILLed; its new parent may take a moment to reap it
        while _running(child):  # noqa: ASYNC110 - no event exists for another's reaping
            await trio.sleep(0.05)


def _running(pid: int) -> bool:
    """Alive and not a zombie (an orphan's reaper is not ours to wait for)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return False
    return stat[stat.rfind(b")") + 2:][:1] not in (b"Z", b"X")


async def test_spawn_pty_reaps_on_cancellation(tmp_path: Path) -> None:
    with trio.move_on_after(0):
        async with spawn_pty(["sleep", "1000"], cwd=tmp_path, env=None, cols=80, rows=24):
            await trio.sleep_forever()
    assert not live_groups()


async def test_a_manifestless_spec_is_refused(tmp_path: Path) -> None:
    send, _ = trio.open_memory_channel[object](10)
    spec = AgentSpec(name="x", binding="pty", config=SessionConfig(cwd=str(tmp_path)),
                     argv=("bash",))
    with pytest.raises(ConnectError, match="no manifest"):
        async with PtyConnector().open(spec, send):
            pass




async def test_a_failed_read_is_not_a_death(tmp_path: Path) -> None:
    """The program closes every descriptor on its terminal (reads then fail with EIO) but
    keeps running: the session stays up, and only its real exit would end it."""
    script = "echo ready-now; exec 0<&- 1>&- 2>&-; exec sleep 1000"
    m = manifest("closer", ["sh", "-c", script], ready="^ready-now$", idle=["^>$"])
    async with driven(m, tmp_path) as d:
        with trio.fail_after(WAIT):
            await d.conn.output_ended.wait()
        assert d.conn.pty.returncode is None and not d.conn.exited.is_set()
        assert not d.gone and not d.of(CapError)
    assert not live_groups()
