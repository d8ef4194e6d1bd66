"""Entry point of ``cap``: builds the parser from one module per command group.

Exit codes (DESIGN §5): 0 completed; 1 the session failed, was refused or
cancelled; 2 bad usage or an invalid input file; 130 interrupted from the
keyboard (after the log was closed cleanly).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from actors import __version__

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130

# Each module exposes ``register(subparsers)``; the parser it adds sets ``func``.
COMMAND_MODULES = (
    "actors.cli.run_cmd",
    "actors.cli.log_cmd",
)


class UsageError(Exception):
    """Bad usage or an invalid input file: printed, exit code 2."""


def build_parser() -> argparse.ArgumentParser:
    import importlib

    parser = argparse.ArgumentParser(
        prog="cap",
        description=(
            "trio-cap: drive command-line AI agents over CAP, log every event, "
            "replay any run."
        ),
    )
    parser.add_argument("--version", action="version", version=f"trio-cap {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return EXIT_USAGE
    try:
        return int(args.func(args) or 0)
    except UsageError as exc:
        print(f"cap: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:
        # the reader went away (e.g. `| head`); not an error of ours
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - silence the flush at exit
        return EXIT_OK
    except KeyboardInterrupt:
        print("cap: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
