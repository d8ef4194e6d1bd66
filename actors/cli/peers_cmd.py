"""``cap peers``: install the real CLI agents and give each run an isolated environment.

Kept separate from the harness library so the library stays importable without
argparse, and so the lead can add the group to ``COMMAND_MODULES`` on its own.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import trio

from trio_cap.actors.cli.common import UsageError
from trio_cap.actors.peers.catalog import PEERS, resolve_names

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2

_EPILOG_NAMES = "peers: " + ", ".join(f"{n} ({s.requirement()})" for n, s in PEERS.items())


def register(subparsers: Any) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "peers",
        help="install real CLI agents (pinned) and print isolated environments for them",
        description=(
            "Manage the real command-line agents trio-cap is tested against: install pinned "
            "versions into a per-user cache outside the repository, list them, and print an "
            "isolated environment that points one of them at a local model server."
        ),
        epilog=_EPILOG_NAMES,
    )
    parser.set_defaults(func=lambda _args: (parser.print_help(), EXIT_USAGE)[1])
    sub = parser.add_subparsers(dest="peers_command", metavar="SUBCOMMAND")

    p = sub.add_parser(
        "install",
        help="install pinned agents into the cache (reuses complete installs)",
        description=(
            "Install the named agents (or all) at their pinned versions into the peers cache: "
            "npm agents with `npm install --prefix <cache>/<name>-<version>`, aider into its own "
            "virtualenv. A complete install is reused. Prints where each program is."
        ),
        epilog=_EPILOG_NAMES,
    )
    p.add_argument("names", nargs="+", metavar="NAME", help="peer name, or `all`")
    p.add_argument("--force", action="store_true", help="reinstall even if already installed")
    p.add_argument("--dir", type=Path, default=None,
                   help="peers cache directory (default: $TRIO_CAP_PEERS_DIR, else "
                        "$XDG_CACHE_HOME/trio-cap/peers, else ~/.cache/trio-cap/peers)")
    p.add_argument("--jobs", type=int, default=3, metavar="N",
                   help="installs run side by side (default 3)")
    p.set_defaults(func=cmd_install)

    p = sub.add_parser(
        "list",
        help="list known agents, their pinned versions and whether they are installed",
        description="List every known peer: pinned package, API shape it calls, and where its "
                    "program is (or that it is missing).",
    )
    p.add_argument("--dir", type=Path, default=None, help="peers cache directory")
    p.add_argument("--json", action="store_true", help="print one JSON object per peer")
    p.set_defaults(func=cmd_list)

    p = sub.add_parser(
        "env",
        help="print an isolated environment pointing one agent at a model server",
        description=(
            "Create a HOME (and config dirs) for runs of NAME, pre-seed its config "
            "(onboarding, settings, provider, price map), and print the environment as shell "
            "`export` lines (or JSON): base URL and dummy key set, telemetry, auto-update and "
            "nonessential traffic off. Usage: eval \"$(cap peers env claude-code --model-url "
            "http://127.0.0.1:8080)\"; claude -p hi"
        ),
        epilog=_EPILOG_NAMES,
    )
    p.add_argument("name", metavar="NAME", choices=sorted(PEERS), help="peer name")
    p.add_argument("--model-url", required=True, metavar="URL",
                   help="base URL of the model server, e.g. http://127.0.0.1:8080 (no /v1)")
    p.add_argument("--home", type=Path, default=None,
                   help="directory to use as the run's HOME (default: <peers dir>/homes/NAME, "
                   "created once and re-seeded on every call, so repeated calls leave no "
                   "directories behind; pass a new directory for a pristine HOME)")
    p.add_argument("--workdir", type=Path, default=None,
                   help="project directory the agent will work in (pre-trusted where needed)")
    p.add_argument("--model", default=None, help="model name the agent should request")
    p.add_argument("--api-key", default="dummy", help="dummy API key to present (default dummy)")
    p.add_argument("--dir", type=Path, default=None, help="peers cache directory")
    p.add_argument("--json", action="store_true", help="print JSON instead of export lines")
    p.set_defaults(func=cmd_env)
    return parser


def _root(args: argparse.Namespace) -> Path:
    from trio_cap.actors.peers.install import peers_root

    return args.dir.expanduser().resolve() if args.dir else peers_root()


def cmd_install(args: argparse.Namespace) -> int:
    from trio_cap.actors.peers.install import install_peers

    try:
        specs = resolve_names(args.names)
    except KeyError as exc:
        print(f"cap peers install: {exc.args[0]}", file=sys.stderr)
        return EXIT_USAGE
    root = _root(args)
    started = time.monotonic()

    def progress(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    done, failed = trio.run(
        lambda: install_peers(specs, root, force=args.force, concurrency=args.jobs,
                              progress=progress)
    )
    for st in done:
        how = "reused" if st.reused else f"installed in {st.seconds:.0f} s"
        print(f"{st.spec.name}\t{st.spec.requirement()}\t{how}\t{st.binary}")
    for name, exc in failed.items():
        print(f"cap peers install: {name} FAILED: {exc}", file=sys.stderr)
    print(f"peers dir {root}; {len(done)} ready, {len(failed)} failed, "
          f"{time.monotonic() - started:.0f} s", file=sys.stderr)
    return EXIT_FAILED if failed else EXIT_OK


def cmd_list(args: argparse.Namespace) -> int:
    from trio_cap.actors.peers.install import status

    root = _root(args)
    for spec in PEERS.values():
        st = status(spec, root)
        where = str(st.binary) if st.installed else "not installed"
        if args.json:
            print(json.dumps({
                "name": spec.name, "package": spec.package, "version": spec.pinned_version(),
                "installer": spec.installer, "api": spec.api, "installed": st.installed,
                "binary": str(st.binary), "version_output": st.version_output,
            }))
        else:
            print(f"{spec.name:16} {spec.requirement():40} {spec.api:17} {where}")
    return EXIT_OK


def cmd_env(args: argparse.Namespace) -> int:
    from trio_cap.actors.peers.env import isolated_env

    root = _root(args)
    # a fixed home per peer: printing an environment must not leave a new temp dir each time
    home = args.home if args.home is not None else root / "homes" / args.name
    url = urlsplit(args.model_url)
    if url.scheme not in ("http", "https") or not url.netloc:
        raise UsageError(f"--model-url {args.model_url!r}: give the model server's base URL, "
                         "e.g. http://127.0.0.1:8080")
    try:
        penv = isolated_env(
            args.name, args.model_url, home=home, workdir=args.workdir, model=args.model,
            api_key=args.api_key, root=root,
        )
    except OSError as exc:  # a HOME that is a file, under a file, not writable, ...
        why = ("a file is in the way of a directory"
               if isinstance(exc, (FileExistsError, NotADirectoryError)) else exc.strerror)
        raise UsageError(f"cannot set up the environment: {exc.filename or home}: "
                         f"{why or exc}") from None
    if args.json:
        print(json.dumps({"name": penv.name, "home": str(penv.home),
                          "binary": str(penv.binary), "installed": penv.installed,
                          "files": [str(f) for f in penv.files], "env": penv.env}, indent=1))
        return EXIT_OK
    for key in sorted(penv.env):
        print(f"export {key}={shlex.quote(penv.env[key])}")
    if not penv.installed:
        print(f"# {args.name} is not installed yet: cap peers install {args.name}")
    print(f"# then run: {shlex.quote(str(penv.binary))} ...")
    return EXIT_OK
