"""Every way ``cap model serve`` cannot start, as a real process: exit 2 and one line.

Each case runs ``python -m trio_cap.actors.cli model serve …`` and checks the exit
code, that stderr is exactly one line naming the file (or address) and the
problem, that no traceback appears, and that it ended within the bound.
"""

from __future__ import annotations

import gzip
import os
import socket
from pathlib import Path

import pytest

from tests.harness.serve_process import assert_one_line_failure, run_serve

# (file name, bytes, what the one line must say)
BAD_SCRIPTS = [
    ("backref.toml", b'[[rules]]\nmatch = "(a)\\\\1"\ntext = "x"\n',
     ["rules[0].match", "backreferences", "RE2"]),
    ("named-backref.toml", b'[[rules]]\nmatch = "ok"\n[[rules]]\nmodel = "(?P<m>a)(?P=m)"\n',
     ["rules[1].model", "backreferences"]),
    ("lookahead.toml", b'[[rules]]\nmatch = "x"\n[[rules]]\nmatch = "y"\n'
                       b'[[rules]]\nmatch = "z"\n[[rules]]\nsystem = "foo(?=bar)"\n',
     ["rules[3].system", "look-around"]),
    ("lookbehind.toml", b'[[rules]]\nmatch = "(?<!no)yes"\n', ["rules[0].match", "look-around"]),
    ("unbalanced.toml", b'[[rules]]\nmatch = "(unclosed"\n', ["rules[0].match", "RE2"]),
    ("python-only.toml", b'[[rules]]\nmatch = "end\\\\Z"\n', ["rules[0].match", "RE2"]),
    ("binary.toml", bytes(range(256)) * 4, ["binary"]),
    ("gzipped.toml", gzip.compress(b'[default]\ntext = "hi"\n'), ["binary"]),
    ("utf16.toml", '[default]\ntext = "hi"\n'.encode("utf-16"), ["not UTF-8"]),
    ("latin1.toml", '[default]\ntext = "caf\xe9"\n'.encode("latin-1"), ["not UTF-8", "0xe9"]),
    ("not-toml.toml", b"this is not toml at all\n", ["not valid TOML"]),
    ("json.toml", b'{"default": {"text": "hi"}}\n', ["not valid TOML"]),
    ("deep-array.toml", b"x = " + b"[" * 100_000 + b"]" * 100_000 + b"\n",
     ["nested too deeply"]),
    ("deep-table.toml", b"default = " + b"{ then = " * 100_000 + b"{}" + b" }" * 100_000 + b"\n",
     ["nested too deeply"]),
    ("typo.toml", b'[[turns]]\ntxt = "typo"\n', ["txt"]),
    ("wrong-type.toml", b'[[turns]]\nerror = { status = "x" }\n', ["status"]),
    # values that would only have failed at request time
    ("negative-delay.toml", b"[[turns]]\ndelay_ms = -1\n", ["turns[0].delay_ms", ">= 0"]),
    ("bad-status.toml", b"[default]\nerror = { status = 99 }\n", ["error.status", ">= 100"]),
    ("inf-retry.toml", b"[default]\nerror = { retry_after = inf }\n", ["retry_after"]),
    ("nan-retry.toml", b"[default]\nerror = { retry_after = nan }\n", ["retry_after"]),
    ("negative-chunks.toml", b"[default]\nchunk_chars = -3\n", ["chunk_chars"]),
]


@pytest.mark.parametrize("name, content, needles", BAD_SCRIPTS,
                         ids=[case[0] for case in BAD_SCRIPTS])
def test_unusable_script_exits_2_with_one_line(tmp_path: Path, name: str, content: bytes,
                                               needles: list[str]) -> None:
    path = tmp_path / name
    path.write_bytes(content)
    result = run_serve(["--script", str(path)])
    assert_one_line_failure(result, 2, str(path), *needles)


@pytest.mark.parametrize("target, needle", [
    ("missing.toml", "No such file"),
    (".", "Is a directory"),
    ("/dev/zero", "larger than 16 MiB"),
])
def test_unreadable_script_exits_2_with_one_line(tmp_path: Path, target: str,
                                                 needle: str) -> None:
    path = target if target.startswith("/") else str(tmp_path / target)
    result = run_serve(["--script", path])
    assert_one_line_failure(result, 2, path.rstrip("/."), needle)


def test_oversized_script_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "huge.toml"
    path.write_bytes(b"# " + b"x" * (17 * 1024 * 1024) + b"\n")
    assert_one_line_failure(run_serve(["--script", str(path)]), 2, str(path), "16 MiB")


def test_port_in_use_is_one_line() -> None:
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        result = run_serve(["--listen", f"127.0.0.1:{port}"])
    line = assert_one_line_failure(result, 2)
    assert line == f"cap model serve: 127.0.0.1:{port} is already in use"


@pytest.mark.parametrize("listen, needles", [
    ("192.0.2.1:0", ["192.0.2.1:0", "no such address"]),  # TEST-NET-1: never local
    ("256.1.1.1:0", ["256.1.1.1:0", "unknown host"]),
    ("127.0.0.1:70000", ["70000", "out of range"]),
    ("127.0.0.1:-1", ["HOST:PORT"]),
    ("127.0.0.1", ["HOST:PORT"]),
    ("127.0.0.1:\uff18\uff10", ["HOST:PORT"]),  # fullwidth digits: isdigit() but not ASCII
])
def test_other_listen_failures_are_one_line(listen: str, needles: list[str]) -> None:
    assert_one_line_failure(run_serve(["--listen", listen]), 2, *needles)


@pytest.mark.parametrize("target, needle", [
    ("dir", "Is a directory"),
    ("/proc/version/x.jsonl", ""),
])
def test_unopenable_record_file_is_one_line(tmp_path: Path, target: str, needle: str) -> None:
    path = target if target.startswith("/") else str(tmp_path)
    result = run_serve(["--record", path])
    assert_one_line_failure(result, 2, "cannot open the record file", path, needle)


def test_record_fifo_without_a_reader_is_one_line_not_a_hang(tmp_path: Path) -> None:
    fifo = tmp_path / "record.fifo"
    os.mkfifo(fifo)
    result = run_serve(["--record", str(fifo)])
    assert_one_line_failure(result, 2, "cannot open the record file", str(fifo), "FIFO")
