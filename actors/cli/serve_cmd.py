"""``cap serve a2a``: publish a locally driven agent, or a whole fleet behind one agent face
(``--fleet``, :mod:`trio_cap.actors.fleet_face`), as an A2A peer (CAP core §11.2).

Every failure before the server listens is one line and exit 2 (bad usage, an
unusable token file, an agent that cannot be resolved, a non-loopback address
without a token, an address that cannot be listened on); SIGINT exits 130 and
SIGTERM 0, after every stream ended and every session was closed in the log.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys

import trio

from trio_cap.actors.cli.common import (
    EXIT_INTERRUPTED,
    EXIT_OK,
    UsageError,
    brain_script,
    read_text_file,
)

_DESCRIPTION = """\
Publish an agent (or, with --fleet, a whole fleet) as an A2A peer: every A2A
conversation (contextId) is one trio-cap session of the agent, started
through the orchestrator and logged
like `cap run` (--log, default .cap/runs/<run-id>.caplog; contextId = the
session id), and every task is one turn of it.

  agent card    GET /.well-known/agent-card.json (and /.well-known/agent.json):
                the manifest's name and profiles, the cap-protocol/v1
                extension, both A2A interfaces (1.0 and 0.3) on one URL
  JSON-RPC      POST /a2a/jsonrpc, both spellings, chosen by method name
                (message/stream … or SendStreamingMessage …) and A2A-Version:
                send, stream (SSE), get, cancel, resubscribe; v1 ListTasks
  questions     an ask or a permission request of the agent makes the task
                input-required; its message carries the prompt as text and
                the request as a data part (metadata "cap.kind"). Reply on the
                same taskId + contextId: text (permissions: allow, always or
                deny) or a data part {"kind": "cap.ask_user.answer", "value": …}
                / {"kind": "cap.permission.response", "decision": …}
  raw output    ?include_raw=1 on the JSON-RPC URL (or message metadata
                {"cap.include_raw": true}) adds cap.pty.raw_bytes to a stream
                (a PTY agent's screen bytes, logged within the session's raw
                output budget)

a fleet       --fleet FLEET publishes the whole fleet as one agent (the card
                has the fleet's name): a message runs the fleet with its text as
                the task; the task streams the fleet's plan (a cap.plan data
                part), each member's text (starting "[member] ") and the
                fleet's answer; what a member's policy leaves to a person (ask,
                high risk) makes the task input-required, the request's _meta
                "cap.member" naming the member; the fleet's events are in the
                same log (streams fleet:<name> and <name>.<member>).  A failed
                fleet fails the task.  --cwd defaults to the fleet's repo.

security:
  --token-file F  accept only `Authorization: Bearer TOKEN` with a token from
                  F (one per line: TOKEN, or NAME TOKEN; # comments). Each
                  token is an identity: a caller sees, answers and cancels only
                  the tasks its own token created. The card stays public.
  Listening on anything but loopback without --token-file is refused.
  Request bodies over --max-request-bytes get HTTP 413; malformed JSON-RPC
  gets the JSON-RPC error for it, never a traceback.

exit codes:
  0    stopped by SIGTERM      130  stopped by Ctrl-C (SIGINT)
  1    the log could not be written
  2    bad usage: an unknown agent, a fleet file with problems, an unusable
       token file, a non-loopback address without a token, an address in use
"""


def register(sub: argparse._SubParsersAction) -> None:
    serve = sub.add_parser("serve", help="publish an agent or a fleet over A2A",
                           description="Publish agents to other orchestrators and clients.")
    serve.set_defaults(func=lambda _args: (serve.print_help(), 2)[1])
    protocols = serve.add_subparsers(dest="serve_protocol", metavar="PROTOCOL")
    a2a = protocols.add_parser("a2a", help="publish an agent or a fleet as an A2A peer "
                               "(HTTP + SSE)",
                               description=_DESCRIPTION,
                               formatter_class=argparse.RawDescriptionHelpFormatter)
    a2a.add_argument("--listen", required=True, metavar="HOST:PORT",
                     help="address to listen on (port 0: a free one, printed); anything but "
                     "loopback needs --token-file")
    what = a2a.add_mutually_exclusive_group(required=True)
    what.add_argument("--agent", metavar="NAME|MANIFEST",
                      help="the agent to publish: a manifest name or path (see `cap manifest "
                      "list`), or an ad-hoc spec such as stream-json:CMD")
    what.add_argument("--fleet", metavar="FLEET",
                      help="publish a whole fleet (a fleet.toml or .yaml) as one agent: "
                      "each task runs the fleet with the message as its task (see above)")
    a2a.add_argument("--token-file", metavar="F", help="bearer tokens (see above)")
    a2a.add_argument("--binding", metavar="B", help="use only this binding for the agent")
    a2a.add_argument("--permissions", choices=("ask", "allow", "deny"), default="ask",
                     help="who answers the agent's permission requests: ask (default: the "
                     "A2A caller, through input-required), allow (trio-cap approves low and "
                     "medium risk), deny")
    a2a.add_argument("--allow-high-risk", action="store_true",
                     help="let allow approve high-risk requests too")
    a2a.add_argument("--cwd", metavar="DIR", help="the sessions' working directory "
                     "(default: the current directory)")
    a2a.add_argument("--model", metavar="M", help="model name passed to the agent")
    a2a.add_argument("--script", metavar="F", help="script (TOML) for cap-agent's brain")
    a2a.add_argument("--log", metavar="FILE", help="event log (default "
                     ".cap/runs/<run-id>.caplog)")
    a2a.add_argument("--fsync", choices=("always", "batch", "never"), default="batch",
                     help="log durability (default batch)")
    a2a.add_argument("--a2a-version", choices=("both", "1.0", "0.3"), default="both",
                     help="spellings offered on the card and accepted (default both)")
    a2a.add_argument("--public-url", metavar="URL",
                     help="base URL to put on the card when clients reach the server through "
                     "a proxy (default http://HOST:PORT)")
    a2a.add_argument("--max-sessions", type=int, default=64, metavar="N",
                     help="conversations open at once (default 64; more are refused)")
    a2a.add_argument("--idle-close", type=float, default=1800.0, metavar="S",
                     help="close a conversation's session (ending its agent) after S seconds "
                     "without a call while no task is at work (a question nobody answers "
                     "counts as idle; default 1800; 0: never); later messages are refused")
    a2a.add_argument("--max-request-bytes", type=int, default=4 * 1024 * 1024, metavar="N",
                     help="largest JSON-RPC body (default 4 MiB; larger gets HTTP 413)")
    a2a.set_defaults(func=serve_a2a)


def read_tokens(path: str) -> dict[str, str]:
    """token → identity; an empty or unreadable file is a usage error (never an open server)."""
    text = read_text_file("--token-file", path)
    tokens: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), 1):
        fields = line.split("#", 1)[0].split() if not line.lstrip().startswith("#") else []
        if not fields:
            continue
        if len(fields) > 2:
            raise UsageError(f"--token-file {path}:{number}: want TOKEN or NAME TOKEN")
        name, token = (fields[0], fields[1]) if len(fields) == 2 else (f"token-{number}",
                                                                        fields[0])
        if len(token) < 16:
            raise UsageError(f"--token-file {path}:{number}: a token must be at least 16 "
                             "characters")
        if token in tokens:
            raise UsageError(f"--token-file {path}:{number}: the same token twice")
        tokens[token] = name
    if not tokens:
        raise UsageError(f"--token-file {path}: no tokens in it")
    return tokens


def serve_a2a(args: argparse.Namespace) -> int:
    from trio_cap.actors.bindings.a2a.serve_server import ListenError, bind, is_loopback
    from trio_cap.actors.cli.run_cmd import open_log, resolve_checked
    from trio_cap.actors.ids import run_id
    from trio_cap.actors.model_server.server import parse_listen

    fleet = None
    if args.fleet is not None:
        from trio_cap.actors.cli.fleet_cmd import load_checked

        for flag, value in (("--binding", args.binding), ("--script", args.script),
                            ("--model", args.model)):
            if value:
                raise UsageError(f"{flag} does not go with --fleet: the fleet file says each "
                                 "member's agent, binding, script and model")
        fleet = load_checked(args.fleet)
    try:
        host, port = parse_listen(args.listen)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    tokens = read_tokens(args.token_file) if args.token_file else None
    if tokens is None and not is_loopback(host):
        raise UsageError(f"--listen {args.listen}: refusing to serve a non-loopback address "
                         "without --token-file (anyone who can reach it could drive the agent)")
    if not args.idle_close >= 0:
        raise UsageError(f"--idle-close {args.idle_close}: give seconds >= 0 (0: never)")
    for flag, value in (("--max-sessions", args.max_sessions),
                        ("--max-request-bytes", args.max_request_bytes)):
        if value < 1:
            raise UsageError(f"{flag} {value}: must be at least 1")
    # a fleet face's questions name paths in the members' worktrees, under the fleet's repo
    cwd = os.path.abspath(args.cwd or (fleet.repo if fleet is not None else "."))
    if not os.path.isdir(cwd):
        raise UsageError(f"--cwd {cwd}: not a directory")
    script = brain_script(args.script)
    agent = (trio.run(resolve_checked, args.agent, args.binding) if fleet is None
             else trio.run(_fleet_face, fleet))
    try:
        bound = bind(host, port)  # before the log exists: a refusal leaves nothing behind
    except ListenError as exc:
        raise UsageError(str(exc)) from None
    log_path = args.log or os.path.join(".cap", "runs", f"{run_id()}.caplog")
    log = open_log(log_path, args.fsync)
    print(f"cap serve a2a: logging to {log_path}", file=sys.stderr, flush=True)
    return trio.run(_serve, args, agent, log, bound, tokens, cwd, script, fleet)


async def _fleet_face(fleet):  # type: ignore[no-untyped-def]
    """The published agent of ``--fleet``: trio-cap's own manifest under the fleet's name,
    run in process by the fleet face (the binding ``fleet``)."""
    import attrs

    from trio_cap.actors.orchestrator import resolve

    own = await resolve("cap-agent")
    manifest = own.manifest
    return attrs.evolve(own, manifest=attrs.evolve(manifest, agent=attrs.evolve(
        manifest.agent, name=fleet.name)))


async def _serve(args: argparse.Namespace, agent, log, bound,
                 tokens: dict[str, str] | None, cwd: str, script, fleet=None) -> int:
    from trio_cap.actors.bindings.a2a.frames import CURRENT, DRAFT
    from trio_cap.actors.bindings.a2a.serve_server import open_a2a_server
    from trio_cap.actors.bindings.a2a.serve_sessions import SessionOptions
    from trio_cap.actors.bindings.pty.connector import PtyConnector
    from trio_cap.actors.cli.run_cmd import DEFAULT_IDLE_TIMEOUT
    from trio_cap.actors.orchestrator import open_orchestrator
    from trio_cap.actors.session.timers import Timeouts

    spellings = {"both": (CURRENT, DRAFT), "1.0": (CURRENT,), "0.3": (DRAFT,)}[args.a2a_version]
    options = SessionOptions(binding="fleet" if fleet is not None else args.binding, cwd=cwd,
                             model=args.model, script=script,
                             permissions=args.permissions,
                             allow_high_risk=args.allow_high_risk,
                             max_sessions=args.max_sessions,
                             idle_close=args.idle_close or None)
    exit_code = EXIT_OK
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with log, open_orchestrator(log) as orch:
            orch.default_timeouts = Timeouts(idle=DEFAULT_IDLE_TIMEOUT)
            # a PTY agent's screen bytes are logged (within the session's raw output
            # budget) so that subscribers asking for them (include_raw) can have them
            orch.connectors["pty"] = PtyConnector(raw_bytes=True)
            if fleet is not None:
                # each conversation is a session whose agent is the fleet face: its runs are
                # logged in this orchestrator's log, beside the conversations' own events
                from trio_cap.actors.bindings.inproc import InprocConnector
                from trio_cap.actors.fleet_face import FleetCore

                def face(emit, session_id):  # type: ignore[no-untyped-def]
                    return FleetCore(fleet, emit, session_id=session_id, orch=orch)

                orch.connectors["fleet"] = InprocConnector(make_core=face, binding="fleet")
            async with open_a2a_server(orch, agent, bound=bound, tokens=tokens,
                                       options=options, spellings=spellings,
                                       public_url=args.public_url,
                                       max_body=args.max_request_bytes) as server:
                print(f"cap serve a2a: listening on {server.base_url} (agent card "
                      f"{server.card_url}, JSON-RPC {server.rpc_url})", flush=True)
                async for signum in signals:
                    exit_code = EXIT_INTERRUPTED if signum == signal.SIGINT else EXIT_OK
                    orch.shutdown_reason = f"cap serve a2a received {signal.Signals(signum).name}"
                    break
    print("cap serve a2a: stopped; every session is closed in the log", file=sys.stderr,
          flush=True)
    return exit_code
