"""``cap policy check LOG``: try a candidate permission policy on a recorded log.

Every permission request and ask the log holds is decided again by the
session machine with the candidate (``--permissions``, ``--allow-high-risk``,
``--rules FILE``; see :mod:`..replay.policy`), and set next to what was
decided then.  Prints the counts and each difference (seq, tool, input,
risk, then → now).  Exit 0; with ``--fail-on-widen``, 1 when the candidate
would have approved anything that was not approved.
"""

from __future__ import annotations

import argparse

import msgspec

from trio_cap.actors.cli.common import EXIT_FAILED, EXIT_OK, UsageError
from trio_cap.actors.replay.check import group_sessions
from trio_cap.actors.replay.policy import Candidate, RulesError, check_policy, load_rules
from trio_cap.actors.session.policy import POLICIES


def register(sub: argparse._SubParsersAction) -> None:
    policy = sub.add_parser("policy", help="try a permission policy on a recorded log")
    policy_sub = policy.add_subparsers(dest="policy_command", metavar="SUBCOMMAND",
                                       required=True)
    check = policy_sub.add_parser(
        "check", help="decide every recorded permission request and ask again",
        description="Decide every permission request and ask in LOG again with a candidate "
        "policy, through the same session machine (its own risk rating), and print what it "
        "would have decided next to what was decided: counts, then each difference with its "
        "seq, tool, input and risk.  Exit 0, or with --fail-on-widen 1 when the candidate "
        "would have approved something that was refused or left pending.  Rules file (TOML): "
        "[[rule]] tool = GLOB, input = GLOB, risk = [low|medium|high...], decision = "
        "allow|deny|ask; the first match decides, and no rule approves high risk without "
        "--allow-high-risk.")
    check.add_argument("log", metavar="LOG", help="path of the .caplog file")
    check.add_argument("--permissions", choices=POLICIES,
                       help="the candidate policy (default: each session's own)")
    check.add_argument("--allow-high-risk", action="store_true",
                       help="the candidate may approve high risk")
    check.add_argument("--rules", metavar="FILE", help="per-tool rules on top (TOML)")
    check.add_argument("--session", metavar="ID", help="only this session")
    check.add_argument("--fail-on-widen", action="store_true",
                       help="exit 1 if the candidate approves anything that was not approved")
    check.set_defaults(func=policy_check)


def policy_check(args: argparse.Namespace) -> int:
    from trio_cap.actors.cli.log_cmd import Reporter, open_readonly

    try:
        rules = load_rules(args.rules) if args.rules else ()
    except RulesError as exc:
        raise UsageError(str(exc)) from None
    log = open_readonly(args.log)
    report = Reporter(log)
    streams = group_sessions([log.read()], args.session)
    log.close()
    if args.session is not None and args.session not in streams:
        raise UsageError(f"no session {args.session!r} in {args.log}")
    result = check_policy(streams, Candidate(args.permissions, args.allow_high_risk, rules))
    print(f"{result.permissions} permission request(s), {result.asks} ask(s): {result.same} "
          f"decided the same, {len(result.differences)} differently "
          f"({result.widened} wider, {len(result.differences) - result.widened} narrower)")
    for d in result.differences:
        shown = d.input if isinstance(d.input, str) else msgspec.json.encode(d.input).decode()
        if len(shown) > 200:
            shown = shown[:199] + "…"
        risk = f", {d.risk} risk" if d.risk else ""
        mark = " WIDER" if d.widens else ""
        print(f"  seq {d.seq} [{d.session}] {d.what} {d.tool}{risk}: {shown}\n"
              f"    was {d.recorded} ({d.recorded_by}) → would be {d.candidate} "
              f"({d.candidate_by}){mark}")
    damaged = report.finish()
    if args.fail_on_widen and result.widened:
        return EXIT_FAILED
    return damaged or EXIT_OK
