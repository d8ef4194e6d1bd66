"""``cap-agent``: trio-cap's agent under Claude Code's own command line.

The Claude Agent SDKs exec a ``claude`` binary with Claude Code's flags; point
``cli_path`` (Python) or ``pathToClaudeCodeExecutable`` (TypeScript) here and
they drive trio-cap's scripted brain instead.  Both ``--flag value`` and
``--flag=value`` are accepted and unknown flags are tolerated (a warning on
stderr), because an SDK newer than this program must still be able to start it.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from trio_cap.actors import __version__
from trio_cap.actors.bindings.stream_json.agent_argv import OptionsError, parse_claude_argv
from trio_cap.actors.bindings.stream_json.agent_side import COMPAT_VERSION
from trio_cap.actors.cli.common import EXIT_USAGE
from trio_cap.actors.cli.errors import report

USAGE = f"""\
usage: cap-agent [Claude Code flags] [trio-cap flags]

trio-cap {__version__}'s scripted agent speaking Claude Code's stream-json on stdio
(compatible with Claude Code {COMPAT_VERSION}'s --output-format/--input-format stream-json).

Claude Code flags it acts on:
  --output-format stream-json   (required; the only output it prints)
  --input-format stream-json|text
                                frames on stdin (default), or one prompt: the
                                positional argument, else all of stdin
  --verbose, -p/--print          accepted (stream-json output needs no more)
  --model M                      model name it reports (default: the script's)
  --system-prompt S, --system-prompt-file F, --append-system-prompt S
                                 the system prompt (also taken from initialize)
  --max-turns N                  model round trips per turn (one per tool result)
  --max-budget-usd X             refuse a turn once X dollars are spent
  --permission-mode M            default|acceptEdits|plan|bypassPermissions|dontAsk|auto|manual
  --dangerously-skip-permissions same as --permission-mode bypassPermissions
  --permission-prompt-tool stdio ask the client (can_use_tool); without it, calls
                                 that need permission are denied
  --allowedTools A,B  --disallowedTools A,B  --tools A,B
                                 permission rules (Tool, Tool(prefix:*), Tool(glob))
  --include-partial-messages     stream_event frames with deltas
  --session-id ID                the session id (default: a new uuid)
  -v, --version                  print the version and exit
Any other flag is accepted and ignored (noted on stderr).

trio-cap flags:
  --script F                     script file (TOML) for the scripted brain
  --bridge AGENT [--binding B]   drive AGENT (name, manifest path, stream-json:CMD …)
                                 through trio-cap and speak for it instead of the brain
  --fleet FLEET                  be a whole fleet (fleet.toml/.yaml) instead of the brain:
                                 each prompt is its task; members' text, plan and
                                 permission requests (agent_id = the member) stream here
  --log FILE                     record the agent's events in this file log
  --fsync always|batch|never     log durability (default batch)
  --transcript-diff-every N      a transcript diff every N logged events (default 1000)
  --transcript-diff-interval S   pending transcript events every S seconds (default 2)
  --no-workspace-diff            no diff artifact of the files each turn changed
  --transcript-file F            write the session's transcript (JSON) to F at exit
  --cap-manifest                 print the agent's manifest (TOML) and exit
"""


def main(argv: Sequence[str] | None = None) -> int:
    from trio_cap.actors.cli.agent_cmd import manifest_text, run_agent

    args = sys.argv[1:] if argv is None else list(argv)
    try:
        options = parse_claude_argv(args)
    except OptionsError as exc:
        print(f"cap-agent: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if options.show_help:
        sys.stdout.write(USAGE)
        return 0
    if options.show_version:
        print(f"{COMPAT_VERSION} (Claude Code compatible; trio-cap cap-agent {__version__})")
        return 0
    if options.show_manifest:
        sys.stdout.write(manifest_text())
        return 0
    try:
        return run_agent(options)
    except BaseException as exc:  # one line and an exit code, never a traceback
        return report(exc, prog="cap-agent")


if __name__ == "__main__":
    sys.exit(main())
