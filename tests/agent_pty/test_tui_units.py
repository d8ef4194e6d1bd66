"""The TUI agent's pure parts: the keystroke decoder and the TUI machine's key rules."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from trio_cap.actors.bindings.pty.agent_keys import Key, KeyDecoder
from trio_cap.actors.bindings.pty.agent_tui import Deliver, Quit, TuiAgent
from trio_cap.events.kinds import Cancel, CapSessionReady, PermissionRequest, UserInputInject

CAP = Path(sys.executable).parent / "cap"


def test_keys_split_anywhere_decode_the_same() -> None:
    stream = "héllo\r".encode() + b"\x1b[A" + b"\x1b[200~a\rb\x1b[201~" + b"\x03" + b"\x7f"
    whole = KeyDecoder().feed(stream)
    assert whole == [Key("text", "héllo"), Key("enter"), Key("up"), Key("paste", "a\rb"),
                     Key("interrupt"), Key("backspace")]
    for cut in range(1, len(stream)):
        decoder = KeyDecoder()
        keys = decoder.feed(stream[:cut]) + decoder.feed(stream[cut:])
        merged: list[Key] = []
        for key in keys:  # a cut inside text yields two text keys: join them back
            if merged and key.name == "text" and merged[-1].name == "text":
                merged[-1] = Key("text", merged[-1].text + key.text)
            else:
                merged.append(key)
        assert merged == whole, cut


def test_lone_escape_is_a_key_only_when_input_goes_quiet() -> None:
    decoder = KeyDecoder()
    assert decoder.feed(b"\x1b") == []
    assert decoder.flush() == [Key("escape")]
    assert decoder.flush() == []


def ready_tui(drop: int = 0) -> TuiAgent:
    tui = TuiAgent(cols=60, rows=20, header="test", drop_enters=drop)
    tui.start(0.0)
    tui.core([CapSessionReady(session_id="s")], 0.0)
    return tui


def frames(effects: list[object]) -> list[object]:
    return [e.frame for e in effects if isinstance(e, Deliver)]


def test_dropped_enters_keep_the_text_then_send_it_once() -> None:
    tui = ready_tui(drop=1)
    assert frames(tui.keys(b"hi", 0.1)) == []
    assert frames(tui.keys(b"\r", 0.2)) == []  # dropped: still typed
    assert tui.input == "hi"
    (sent,) = frames(tui.keys(b"\r", 0.3))
    assert isinstance(sent, UserInputInject) and sent.text == "hi"
    assert frames(tui.keys(b"\r", 0.4)) == []  # an empty Enter sends nothing


def test_yes_no_takes_the_first_y_or_n_and_escape_cancels() -> None:
    tui = ready_tui()
    tui.keys(b"write a: b\r", 0.1)
    tui.core([PermissionRequest(req_id="r1", tool="Write", intent={"path": "a"})], 0.2)
    (answer,) = frames(tui.keys(b"yes", 0.3))
    assert (answer.req_id, answer.decision) == ("r1", "allow_once")
    assert tui.input == ""  # the rest of "yes" did not leak into the input box
    tui.core([PermissionRequest(req_id="r2", tool="Write", intent={"path": "c"})], 0.4)
    deny, cancel = frames(tui.keys(b"\x1b", 0.5) + tui.quiet(0.6))
    assert (deny.req_id, deny.decision) == ("r2", "deny") and isinstance(cancel, Cancel)


def test_ctrl_d_on_an_empty_input_quits() -> None:
    tui = ready_tui()
    assert not [e for e in tui.keys(b"x\x04", 0.1) if isinstance(e, Quit)]
    assert [e for e in tui.keys(b"\x7f\x04", 0.2) if isinstance(e, Quit)]


def test_without_a_terminal_the_cli_refuses_in_one_line() -> None:
    run = subprocess.run([str(CAP), "agent", "--cap-speak", "pty"], stdin=subprocess.DEVNULL,
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 2, run
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and "needs a terminal" in lines[0], run.stderr
    assert "Traceback" not in run.stderr and run.stdout == ""
