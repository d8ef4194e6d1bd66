"""``cap manifest``: validate manifest files, show how a name resolves, list agents.

Thin over :mod:`trio_cap.actors.manifest`; it only formats.  ``validate`` exits 1 (not
2) on an invalid file because validating is what was asked and the answer is
"no"; a malformed name or ad-hoc spec is bad usage (exit 2).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

import trio

from trio_cap.actors.cli.common import EXIT_FAILED, EXIT_OK, UsageError
from trio_cap.actors.manifest import (
    RULES,
    AdHocError,
    BindingNotOffered,
    BindingPlan,
    ManifestInvalid,
    ManifestNotFound,
    Resolved,
    SearchRoots,
    list_agents,
    load_manifest,
    resolve_agent,
)
from trio_cap.actors.manifest.convert import manifest_data
from trio_cap.actors.manifest.dump import dumps
from trio_cap.actors.manifest.probe_cache import PROCESS_CACHE
from trio_cap.actors.manifest.select import BINDINGS, offered_bindings

_ORDER_TEXT = (
    "Resolution order: 1 path (the argument contains '/' or ends in .toml), "
    "2 in-package (cap-agent.toml next to the NAME program on PATH), "
    "3 user ($XDG_CONFIG_HOME/cap/agents/NAME.toml, default ~/.config), "
    "4 system (/usr/share/cap-agents/NAME.toml), 5 probe (NAME --cap-manifest, 5 s limit, "
    "256 KiB cap), 6 bundled (the manifests shipped with trio-cap). Ad-hoc specs pty:CMD, "
    "stream-json:CMD, acp:CMD and a2a:URL make a one-binding manifest on the spot."
)


def register(subparsers: Any) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "manifest",
        help="validate agent manifests, show how an agent resolves, list known agents",
        description=(
            "An agent manifest (CAP core §5, TOML) says how to start an agent, which "
            "bindings it offers and what it can do. These commands check manifests and "
            "show which one trio-cap would use."
        ),
        epilog=_ORDER_TEXT,
    )
    parser.set_defaults(func=lambda _args: (parser.print_help(), 2)[1])
    sub = parser.add_subparsers(dest="manifest_command", metavar="SUBCOMMAND")

    p = sub.add_parser(
        "validate",
        help="check manifest files; print every problem of every file",
        description=(
            "Validate each manifest file against CAP core §5 and the coding profile §3: "
            "required fields, types, RE2-only patterns, argv arrays (never shell strings). "
            "Prints one OK line per valid file and every error (file: field: problem) of "
            "each invalid one. Exit status 0 when all are valid, 1 otherwise."
        ),
    )
    p.add_argument("paths", nargs="+", metavar="PATH", help="manifest file (TOML)")
    p.set_defaults(func=cmd_validate)

    p = sub.add_parser(
        "resolve",
        help="show where an agent's manifest comes from and which binding would be used",
        description=(
            "Resolve NAME, a manifest PATH or an ad-hoc spec like a trio-cap run would: "
            "print which rule found it (and what each earlier rule saw), the bindings in "
            "the order they would be tried with whether each program is installed, the one "
            "that would be chosen on this machine, and the full manifest with every "
            "default applied. Exit status 0 when found and valid, 1 otherwise."
        ),
        epilog=_ORDER_TEXT,
    )
    p.add_argument("spec", metavar="NAME|PATH", help="agent name, manifest path or ad-hoc spec")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    p.add_argument("--binding", choices=BINDINGS, default=None,
                   help="force this binding, as `cap run --binding` would")
    p.add_argument("--no-probe", action="store_true",
                   help="do not run NAME --cap-manifest (rule 5)")
    p.add_argument("--no-cache", action="store_true",
                   help="probe afresh: ignore remembered NAME --cap-manifest answers (kept per "
                   "program path, size and mtime in $XDG_CACHE_HOME/trio-cap/probes for a day)")
    p.set_defaults(func=cmd_resolve)

    p = sub.add_parser(
        "list",
        help="list every agent with a manifest and where it is found",
        description=(
            "List every agent name that has a manifest in the user, system or bundled "
            "directories (or in its own package), with the rule that wins for it. Programs "
            "are not probed unless --probe is given."
        ),
        epilog=_ORDER_TEXT,
    )
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.add_argument("--probe", action="store_true",
                   help="also run NAME --cap-manifest for each name (rule 5)")
    p.set_defaults(func=cmd_list)
    return parser


# --------------------------------------------------------------------------
# validate
# --------------------------------------------------------------------------

def cmd_validate(args: argparse.Namespace) -> int:
    status = EXIT_OK
    for path in args.paths:
        try:
            m = load_manifest(path)
        except ManifestInvalid as exc:
            status = EXIT_FAILED
            for line in exc.lines():
                print(line, file=sys.stderr)
            continue
        print(f"OK {path}: {m.agent.name} (bindings: {', '.join(offered_bindings(m))})")
    return status


# --------------------------------------------------------------------------
# resolve
# --------------------------------------------------------------------------

def _resolve(spec: str, probe: bool, cache: bool = True) -> Resolved:
    remembered = PROCESS_CACHE if cache else None
    try:
        return trio.run(lambda: resolve_agent(spec, probe=probe, probe_cache=remembered))
    except (AdHocError, ValueError) as exc:  # a malformed spec or name
        raise UsageError(str(exc)) from None


def _plan_json(plan: BindingPlan, resolved: Resolved) -> dict[str, Any]:
    chosen = plan.chosen
    return {
        "chosen": chosen.binding if chosen else None,
        "fast_paths_declared": [c.binding for c in plan.candidates if c.binding != "pty"],
        "candidates": [
            {
                "binding": c.binding,
                "argv": list(c.argv) if c.argv else None,
                "url": c.url,
                "program": c.program,
                "program_path": c.program_path,
                "available": c.available,
            }
            for c in plan.candidates
        ],
        "warnings": list(plan.warnings),
        "only_binding": resolved.only_binding,
    }


def _chosen_text(plan: BindingPlan) -> str:
    chosen = plan.chosen
    fast = [c.binding for c in plan.candidates if c.binding != "pty"]
    declared = f"fast paths declared: {', '.join(fast) if fast else 'none'}"
    if chosen is None:
        return f"none: no declared binding's program is installed ({declared})"
    if chosen.argv:
        where = f"program {chosen.program}: {chosen.program_path}"
    elif chosen.url:
        where = f"remote {chosen.url} (not contacted)"
    else:
        where = "no process needed"
    return f"{chosen.binding} ({where}; {declared})"


def cmd_resolve(args: argparse.Namespace) -> int:
    try:
        resolved = _resolve(args.spec, probe=not args.no_probe, cache=not args.no_cache)
    except ManifestNotFound as exc:
        print(f"cap: {exc.code}: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except ManifestInvalid as exc:
        for line in exc.lines():
            print(line, file=sys.stderr)
        return EXIT_FAILED
    try:
        plan = resolved.plan(force=args.binding)
    except BindingNotOffered as exc:
        raise UsageError(str(exc)) from None
    data = manifest_data(resolved.manifest)
    if args.json:
        out = {
            "agent": resolved.manifest.agent.name,
            "source": resolved.source,
            "rule": resolved.rule_number,
            "location": resolved.location,
            "tried": [
                {"rule": a.rule, "location": a.location, "outcome": a.outcome}
                for a in resolved.tried
            ],
            "bindings": _plan_json(plan, resolved),
            "manifest": data,
        }
        print(json.dumps(out, indent=2, ensure_ascii=False))
        return EXIT_OK
    rule = resolved.rule_number
    found_by = f"rule {rule} of {len(RULES)} ({resolved.source})" if rule else resolved.source
    print(f"agent: {resolved.manifest.agent.name}")
    print(f"found by: {found_by}: {resolved.location}")
    if resolved.tried:
        print("tried first:")
        for a in resolved.tried:
            print(f"  {a.rule}: {a.location}: {a.outcome}")
    print("bindings, in the order they would be tried:")
    for i, c in enumerate(plan.candidates, 1):
        print(f"  {i}. {c.describe()}")
    print(f"would use: {_chosen_text(plan)}")
    for w in plan.warnings:
        print(f"warning: {w}")
    print()
    print("# manifest with every default applied")
    print(dumps(data), end="")
    return EXIT_OK


# --------------------------------------------------------------------------
# list
# --------------------------------------------------------------------------

def cmd_list(args: argparse.Namespace) -> int:
    roots = SearchRoots.from_env()
    rows = trio.run(lambda: list_agents(roots, probe=args.probe))
    if args.json:
        print(json.dumps(
            [{"name": r.name, "source": r.source, "location": r.location, "problem": r.problem}
             for r in rows],
            indent=2,
        ))
        return EXIT_OK
    width = max([len(r.name) for r in rows] + [4])
    print(f"{'NAME':<{width}}  {'SOURCE':<10}  LOCATION")
    for r in rows:
        note = f"  ({r.problem})" if r.problem else ""
        print(f"{r.name:<{width}}  {r.source:<10}  {r.location}{note}")
    return EXIT_OK
