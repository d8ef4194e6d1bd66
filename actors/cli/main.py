"""Entry point of ``cap``: builds the parser from one module per command group.

Exit codes (DESIGN §5): 0 completed; 1 the session failed, was refused,
cancelled or cut short, or the log could not be written; 2 bad usage or an
invalid input file; 70 an internal error (a bug: one line, the traceback with
``CAP_DEBUG=1``); 129 / 130 / 143 hung up / interrupted from the keyboard /
terminated (SIGHUP / SIGINT / SIGTERM, after the session was cancelled and the
log closed).  Nothing escaping a command is ever printed as a traceback.
"""

from __future__ import annotations

import argparse
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
from trio_cap.actors.cli.errors import report
from trio_cap.actors.gc_tuning import tune_gc

# Each module exposes ``register(subparsers)``; the parser it adds sets ``func``.
COMMAND_MODULES = (
    "trio_cap.actors.cli.run_cmd",
    "trio_cap.actors.cli.log_cmd",
    "trio_cap.actors.cli.node_cmd",
    "trio_cap.actors.cli.agent_cmd",
    "trio_cap.actors.cli.manifest_cmd",
    "trio_cap.actors.cli.model_cmd",
    "trio_cap.actors.cli.peers_cmd",
    "trio_cap.actors.cli.serve_cmd",
    "trio_cap.actors.cli.policy_cmd",
    "trio_cap.actors.cli.fleet_cmd",
)


COMMANDS = {
    "run": "trio_cap.actors.cli.run_cmd",
    "log": "trio_cap.actors.cli.log_cmd",
    "replay": "trio_cap.actors.cli.log_cmd",
    "node": "trio_cap.actors.cli.node_cmd",
    "agent": "trio_cap.actors.cli.agent_cmd",
    "manifest": "trio_cap.actors.cli.manifest_cmd",
    "model": "trio_cap.actors.cli.model_cmd",
    "peers": "trio_cap.actors.cli.peers_cmd",
    "serve": "trio_cap.actors.cli.serve_cmd",
    "policy": "trio_cap.actors.cli.policy_cmd",
    "fleet": "trio_cap.actors.cli.fleet_cmd",
}
"""Top-level command → the module that registers it: a command line that names one loads
only that module (``cap agent`` starts an agent; it need not import the A2A server, the
PostgreSQL driver or the orchestrator first).  ``tests/cli`` holds this equal to what
every module registers."""


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The whole parser, or (``command`` known) just the part that command needs."""
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
    modules = (COMMANDS[command],) if command in COMMANDS else COMMAND_MODULES
    for name in modules:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    try:
        words = list(sys.argv[1:] if argv is None else argv)
        parser = build_parser(words[0] if words and not words[0].startswith("-") else None)
        args = parser.parse_args(words)
        if not getattr(args, "func", None):
            parser.print_help()
            return EXIT_USAGE
        tune_gc()  # a command may run thousands of sessions: no full-collection stalls
        return int(args.func(args) or 0)
    except BaseException as exc:  # every escape becomes one line and an exit code
        return report(exc)


if __name__ == "__main__":
    sys.exit(main())
