"""``python -m trio_cap.actors.peers install all``: peers commands without the ``cap`` script.

CI can install the agents before ``cap`` itself is wired up or installed.
"""

from __future__ import annotations

import argparse
import sys

from trio_cap.actors.cli import peers_cmd


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m trio_cap.actors.peers")
    sub = parser.add_subparsers()
    peers_cmd.register(sub)
    args = parser.parse_args(["peers", *(sys.argv[1:] if argv is None else argv)])
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
