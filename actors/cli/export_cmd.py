"""``cap log export LOG --session ID --transcript|--markdown|--html``: one session, to read.

All three are made from the session's events alone (never the agent), so an
export taken on another machine says what the log says:

* ``--transcript``: the coding profile's transcript artifact
  (``application/vnd.cap.coding.transcript.v1+json``: the session's full event log);
* ``--markdown``: a readable account, turn by turn (prompt, answer, tool calls
  with input and output, permission decisions, diffs, errors, usage);
* ``--html``: one self-contained page (inline CSS, no script, no external
  resource) with the same account and a timeline of every event.
"""

from __future__ import annotations

import argparse
import html
import sys
from collections.abc import Iterator, Sequence
from typing import Any

import attrs
import msgspec

from trio_cap.actors.bindings.stream_json.agent_transcript import TRANSCRIPT_MIME, Transcript, _iso
from trio_cap.actors.cli.common import EXIT_OK, UsageError
from trio_cap.actors.cli.render import describe
from trio_cap.events.envelope import Envelope
from trio_cap.events.kinds import (
    Artifact,
    CapError,
    InputInjected,
    PermissionDecided,
    PermissionRequest,
    RunResumed,
    SessionCancelled,
    SessionCompleted,
    SessionCreated,
    SessionFailed,
    TextChunk,
    Thought,
    ToolCallEnd,
    ToolCallStart,
    Usage,
)

DIFF_MIME = "application/vnd.cap.coding.diff.v1"


def register(log_sub: argparse._SubParsersAction) -> None:
    ex = log_sub.add_parser(
        "export", help="write one session as a transcript (JSON), Markdown or an HTML page",
        description="Write one session of LOG, from its events alone: --transcript the coding "
        "profile's transcript artifact (JSON: the session's full event log), --markdown a "
        "readable account turn by turn, --html one self-contained page (no script, no "
        "external resource) with that account and a timeline of every event.")
    ex.add_argument("log", metavar="LOG", help="path of the .caplog file")
    ex.add_argument("--session", metavar="ID",
                    help="the session to export (default: the log's only session)")
    kind = ex.add_mutually_exclusive_group(required=True)
    kind.add_argument("--transcript", dest="format", action="store_const", const="transcript",
                      help="the coding profile's transcript artifact: the session's full event "
                      "log as JSON")
    kind.add_argument("--markdown", dest="format", action="store_const", const="markdown",
                      help="a readable account, turn by turn")
    kind.add_argument("--html", dest="format", action="store_const", const="html",
                      help="one self-contained page with the timeline, tool calls, diffs and "
                      "permission decisions")
    ex.add_argument("--out", metavar="FILE", help="write here instead of standard output")
    ex.set_defaults(func=export_log)


def export_log(args: argparse.Namespace) -> int:
    from trio_cap.actors.cli.log_cmd import Reporter, open_readonly

    log = open_readonly(args.log)
    report = Reporter(log)
    envs = session_events(log.read(), args.session, args.log)
    log.close()
    text = {"transcript": transcript_json, "markdown": markdown,
            "html": html_page}[args.format](envs)
    if args.out:
        try:
            with open(args.out, "w", encoding="utf-8") as f:
                f.write(text)
        except OSError as exc:
            raise UsageError(f"--out {args.out}: {exc.strerror or exc}") from None
        print(f"cap: wrote {args.format} of session {envs[0].stream} to {args.out}",
              file=sys.stderr)
    else:
        sys.stdout.write(text)
    return report.finish() or EXIT_OK


def session_events(envs: Sequence[Envelope], session: str | None, path: str) -> list[Envelope]:
    sessions = [e.event.session_id for e in envs if type(e.event) is SessionCreated]  # type: ignore[attr-defined]
    if session is None:
        if len(set(sessions)) != 1:
            names = ", ".join(dict.fromkeys(sessions)) or "none"
            raise UsageError(f"{path} holds {len(set(sessions))} sessions ({names}); name one "
                             "with --session ID")
        session = sessions[0]
    elif session not in sessions:
        raise UsageError(f"no session {session!r} in {path}")
    return [e for e in envs if e.stream == session]


def transcript_json(envs: Sequence[Envelope]) -> str:
    created: SessionCreated = envs[0].event  # type: ignore[assignment]
    doc = Transcript(session_id=created.session_id, agent=created.agent, model=created.model,
                     started_at=_iso(envs[0].at), ended_at=_iso(envs[-1].at), events=envs)
    return msgspec.json.encode({"mime_type": TRANSCRIPT_MIME,
                                **msgspec.to_builtins(doc)}).decode() + "\n"


# ---- one account, two renderings ----------------------------------------------------------


@attrs.define
class Tool:
    call_id: str
    name: str
    input: Any
    output: str = ""
    is_error: bool | None = None
    decision: PermissionDecided | None = None
    request: PermissionRequest | None = None


@attrs.define
class Turn:
    prompt: str
    seq: int
    parts: list[tuple[str, Any]] = attrs.field(factory=list)
    """("text", str) | ("thought", str) | ("tool", Tool) | ("diff", Artifact) |
    ("error", CapError) | ("usage", Usage) | ("decision", PermissionDecided) | ("note", str)"""


def account(envs: Sequence[Envelope]) -> tuple[SessionCreated, list[Turn], str]:
    """The session turn by turn: what the owner asked and everything that followed."""
    created: SessionCreated = envs[0].event  # type: ignore[assignment]
    turns: list[Turn] = []
    by_input: dict[int, Turn] = {}
    tools: dict[str, Tool] = {}
    requests: dict[str, PermissionRequest] = {}
    outcome = "still running (no terminal event)"
    preamble = Turn(prompt="", seq=0)
    for env in envs:
        ev = env.event
        kind = type(ev)
        if kind is InputInjected:
            turn = Turn(prompt=ev.text, seq=env.seq)  # type: ignore[attr-defined]
            turns.append(turn)
            by_input[env.seq] = turn
            continue
        turn = by_input.get(env.cause or -1) or (turns[-1] if turns else preamble)
        parts = turn.parts
        if kind is TextChunk:
            if parts and parts[-1][0] == "text":
                parts[-1] = ("text", parts[-1][1] + ev.text)  # type: ignore[attr-defined]
            else:
                parts.append(("text", ev.text))  # type: ignore[attr-defined]
        elif kind is Thought:
            parts.append(("thought", ev.text))  # type: ignore[attr-defined]
        elif kind is ToolCallStart:
            tool = tools[ev.call_id] = Tool(ev.call_id, ev.name, ev.input)  # type: ignore[attr-defined]
            parts.append(("tool", tool))
        elif kind is ToolCallEnd and ev.call_id in tools:  # type: ignore[attr-defined]
            tools[ev.call_id].output = ev.output  # type: ignore[attr-defined]
            tools[ev.call_id].is_error = ev.is_error  # type: ignore[attr-defined]
        elif kind is PermissionRequest:
            requests[ev.req_id] = ev  # type: ignore[attr-defined]
        elif kind is PermissionDecided:
            parts.append(("decision", (ev, requests.get(ev.req_id))))  # type: ignore[attr-defined]
        elif kind is Artifact and ev.mime_type.startswith(DIFF_MIME):  # type: ignore[attr-defined]
            parts.append(("diff", ev))
        elif kind is CapError:
            parts.append(("error", ev))
        elif kind is Usage:
            parts.append(("usage", ev))
        elif kind is RunResumed:
            parts.append(("note", describe(ev)))
        elif kind in (SessionCompleted, SessionCancelled, SessionFailed):
            outcome = describe(ev)
    if preamble.parts:
        turns.insert(0, preamble)
    return created, turns, outcome


def _decision_line(decided: PermissionDecided, request: PermissionRequest | None) -> str:
    what = f"{request.tool} {_json(request.intent)}" if request else decided.req_id
    risk = f", {decided.risk} risk" if decided.risk else ""
    return f"{decided.decision} by {decided.by}{risk}: {what}" + (
        f" — {decided.reason}" if decided.reason else "")


def _json(value: Any) -> str:
    return msgspec.json.encode(value).decode()


def markdown(envs: Sequence[Envelope]) -> str:
    created, turns, outcome = account(envs)
    out = [f"# Session {created.session_id}", "",
           f"- agent: {created.agent} via {created.binding}",
           f"- cwd: `{created.cwd}`", f"- permissions: {created.permissions}",
           f"- started: {_iso(envs[0].at)}; last event: {_iso(envs[-1].at)}",
           f"- outcome: {outcome}", ""]
    for n, turn in enumerate(turns, 1):
        out += [f"## Turn {n}" if turn.seq else "## Before the first prompt", ""]
        if turn.seq:
            out += ["**Prompt:**", "", _quote(turn.prompt), ""]
        for kind, part in turn.parts:
            out += [*_md_part(kind, part), ""]
    return "\n".join(out).rstrip() + "\n"


def _quote(text: str) -> str:
    return "\n".join("> " + line for line in text.splitlines() or [""])


def _fence(text: str, lang: str = "") -> str:
    ticks = "```"
    while ticks in text:
        ticks += "`"
    return f"{ticks}{lang}\n{text.rstrip()}\n{ticks}"


def _md_part(kind: str, part: Any) -> Iterator[str]:
    if kind == "text":
        yield part.strip()
    elif kind == "thought":
        yield "*Thinking:* " + part.strip()
    elif kind == "tool":
        state = "failed" if part.is_error else "done" if part.is_error is not None else "no result"
        yield f"**Tool `{part.name}`** ({state})"
        yield _fence(_json(part.input), "json")
        if part.output:
            yield _fence(part.output)
    elif kind == "decision":
        yield "**Permission:** " + _decision_line(*part)
    elif kind == "diff":
        yield f"**Diff** `{part.name}`"
        yield _fence(part.content or "", "diff")
    elif kind == "error":
        yield f"**Error** `{part.code}`: {part.message}"
    elif kind == "usage":
        yield (f"*Usage: {part.input_tokens} in / {part.output_tokens} out tokens, "
               f"${part.cost_usd_estimate:.4f}, {part.stop_reason}*")
    elif kind == "note":
        yield f"*{part}*"


_CSS = """
body{font:15px/1.45 system-ui,sans-serif;margin:0;color:#1d2330;background:#f6f7f9}
header,main,section{max-width:960px;margin:0 auto;padding:0 16px}
header{padding-top:16px}h1{font-size:22px}h2{font-size:18px;margin-top:28px}
.meta{color:#555}.turn{background:#fff;border:1px solid #dde;border-radius:6px;padding:12px;
margin:12px 0}.prompt{border-left:4px solid #4a6ee0;padding-left:10px;white-space:pre-wrap}
.text{white-space:pre-wrap}.thought{color:#666;font-style:italic;white-space:pre-wrap}
.tool{border:1px solid #ccd;border-radius:4px;margin:8px 0;padding:6px}
.tool .name{font-weight:600}pre{background:#f0f2f5;padding:8px;overflow-x:auto;margin:4px 0}
.decision{padding:4px 8px;border-radius:4px;margin:6px 0}.allow{background:#e5f6e8}
.deny{background:#fde8e8}.error{color:#a11}.usage{color:#666;font-size:13px}
.add{color:#116b2a}.del{color:#a11}.hunk{color:#6a4bd0}
table.timeline{border-collapse:collapse;width:100%;font-size:13px;background:#fff}
.timeline td,.timeline th{border-bottom:1px solid #eee;padding:2px 6px;text-align:left;
vertical-align:top}.timeline .kind{font-family:monospace;white-space:nowrap}
"""


def html_page(envs: Sequence[Envelope]) -> str:
    created, turns, outcome = account(envs)
    e = html.escape
    body = [f"<header><h1>Session {e(created.session_id)}</h1>",
            f"<p class='meta'>agent {e(created.agent)} via {e(created.binding)} · cwd "
            f"<code>{e(created.cwd)}</code> · permissions {e(created.permissions)} · started "
            f"{e(_iso(envs[0].at))}</p>",
            f"<p id='outcome'><strong>Outcome:</strong> {e(outcome)}</p></header><main>"]
    for n, turn in enumerate(turns, 1):
        body.append(f"<section class='turn' id='turn-{n}'><h2>"
                    f"{'Turn ' + str(n) if turn.seq else 'Before the first prompt'}</h2>")
        if turn.seq:
            body.append(f"<div class='prompt'>{e(turn.prompt)}</div>")
        body += [_html_part(kind, part) for kind, part in turn.parts]
        body.append("</section>")
    body.append("</main><section id='timeline'><h2>Timeline</h2><table class='timeline'>"
                "<tr><th>seq</th><th>+s</th><th>kind</th><th>what</th></tr>")
    start = envs[0].at
    for env in envs:
        what = describe(env.event)
        body.append(f"<tr><td>{env.seq}</td><td>{env.at - start:.3f}</td>"
                    f"<td class='kind'>{e(env.kind)}</td><td>{e(what)}</td></tr>")
    body.append("</table></section>")
    return ("<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
            f"<title>Session {e(created.session_id)}</title>"
            "<meta http-equiv='Content-Security-Policy' content=\"default-src 'none'; "
            "style-src 'unsafe-inline'\">"
            f"<style>{_CSS}</style></head><body>" + "\n".join(body) + "</body></html>\n")


def _diff_html(text: str) -> str:
    rows = []
    for line in text.splitlines():
        cls = ("add" if line.startswith("+") and not line.startswith("+++") else
               "del" if line.startswith("-") and not line.startswith("---") else
               "hunk" if line.startswith("@@") else "")
        rows.append(f"<span class='{cls}'>{html.escape(line)}</span>" if cls
                    else html.escape(line))
    return "<pre class='diff'>" + "\n".join(rows) + "</pre>"


def _html_part(kind: str, part: Any) -> str:
    e = html.escape
    if kind == "text":
        return f"<div class='text'>{e(part.strip())}</div>"
    if kind == "thought":
        return f"<div class='thought'>{e(part.strip())}</div>"
    if kind == "tool":
        state = "failed" if part.is_error else "done" if part.is_error is not None else "no result"
        out = f"<pre>{e(part.output)}</pre>" if part.output else ""
        return (f"<div class='tool'><span class='name'>{e(part.name)}</span> ({state})"
                f"<pre>{e(_json(part.input))}</pre>{out}</div>")
    if kind == "decision":
        decided, _ = part
        cls = "deny" if decided.decision == "deny" else "allow"
        return f"<div class='decision {cls}'>Permission: {e(_decision_line(*part))}</div>"
    if kind == "diff":
        return f"<div class='diffbox'><strong>Diff {e(part.name)}</strong>" \
               f"{_diff_html(part.content or '')}</div>"
    if kind == "error":
        return f"<div class='error'>Error {e(part.code)}: {e(part.message)}</div>"
    if kind == "usage":
        return (f"<div class='usage'>usage: {part.input_tokens} in / {part.output_tokens} out "
                f"tokens, ${part.cost_usd_estimate:.4f}, {e(part.stop_reason)}</div>")
    return f"<div class='usage'>{e(str(part))}</div>"
