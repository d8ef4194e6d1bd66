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

from trio_cap.actors import __version__
from trio_cap.actors.cli.common import (  # noqa: F401 - re-exported for command modules
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    UsageError,
)

# Each module exposes ``register(subparsers)``; the parser it adds sets ``func``.
COMMAND_MODULES = (
    "trio_cap.actors.cli.run_cmd",
    "trio_cap.actors.cli.log_cmd",
    "trio_cap.actors.cli.agent_cmd",
    "trio_cap.actors.cli.manifest_cmd",
    "trio_cap.actors.cli.model_cmd",
    "trio_cap.actors.cli.peers_cmd",
)


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
    except BaseExceptionGroup as group:
        # Trio delivers Ctrl+C inside the task tree, so it comes back wrapped in nurseries.
        usage = group.subgroup(UsageError)
        if usage is not None and usage.split(UsageError)[1] is None:
            print(f"cap: error: {_first(usage)}", file=sys.stderr)
            return EXIT_USAGE
        if group.subgroup(KeyboardInterrupt) is not None:
            print("cap: interrupted", file=sys.stderr)
            return EXIT_INTERRUPTED
        raise


def _first(group: BaseException) -> BaseException:
    while isinstance(group, BaseExceptionGroup):
        group = group.exceptions[0]
    return group


if __name__ == "__main__":
    sys.exit(main())
