"""``cap model serve``: run the scripted model endpoint from the command line.

The same server the test fixtures use, so a fleet can be rehearsed headlessly
in CI against deterministic replies: start it, point agents at the printed URL
(``cap peers env NAME --model-url URL``), read the request log afterwards.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import trio

EXIT_OK = 0
EXIT_USAGE = 2

_SCRIPT_HELP = """\
script format (TOML):
  models = ["fake-model"]              # names listed by the model endpoints
  [default]                            # used when nothing else matches
  text = "hello from fake model"
  [[rules]]                            # first match wins; never used up
  match = "(?i)create .*file"          # regex on the last user message
  system = "..."  api = "anthropic"  model = "..."   # optional extra conditions
  thinking = "..."                     # reasoning/thinking block
  text = "Creating it."
  tool_calls = [{ name = "Write", arguments = { file_path = "/abs/x.txt", content = "hi" } }]
  then = { text = "Done." }            # reply after the tool result comes back
  [[turns]]                            # used in order, one per new user message
  text = "first"
  error = { status = 429, retry_after = 1, times = 1 }   # fail first, then reply
  delay_ms = 200                       # slow stream: pause between chunks
  json = { answer = 42 }               # reply to JSON-mode requests

rule patterns (match, system, model) are RE2: linear-time matching, no
backreferences or look-around (refused at load, naming the rule).

endpoints: POST /v1/chat/completions, /v1/responses, /v1/messages[?beta=true],
/v1/messages/count_tokens, /v1beta/models/M:generateContent,
/v1beta/models/M:streamGenerateContent[?alt=sse], /v1beta/models/M:countTokens;
GET /v1/models, /v1beta/models; HEAD any path.

limits: request bodies up to 16 MiB (after gzip/deflate decoding) and 2,000,000
JSON values; a larger body gets HTTP 413 with a JSON error as soon as it passes
the limit (at once when Content-Length declares it). Bodies being received at
the same time share 64 MiB; beyond that, HTTP 503 with Retry-After: 1.
Scripts up to 16 MiB.

exit status: 0 stopped by SIGTERM; 130 by Ctrl-C; 1 the --record file stopped
accepting writes; 2 bad usage, an unusable script or record file, or an address
that cannot be listened on (e.g. the port is already in use).
"""


def register(subparsers: Any) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "model",
        help="a scripted, deterministic model endpoint for testing agents headlessly",
        description="Tools around model endpoints. `cap model serve` runs a deterministic "
                    "scripted model server that real agents can be pointed at.",
    )
    parser.set_defaults(func=lambda _args: (parser.print_help(), EXIT_USAGE)[1])
    sub = parser.add_subparsers(dest="model_command", metavar="SUBCOMMAND")
    serve = sub.add_parser(
        "serve",
        help="serve scripted replies in the OpenAI, Anthropic and Gemini API shapes",
        description=(
            "Serve a scripted model over HTTP on loopback. It answers OpenAI chat completions, "
            "OpenAI Responses, Anthropic Messages and Gemini generateContent requests, streamed "
            "or not, with replies from --script (text, thinking, tool calls in each API's own "
            "shape, JSON for JSON-mode requests, injected errors), and logs every request. "
            "Prints `cap model serve: listening on URL` once ready; stops on Ctrl-C or SIGTERM."
        ),
        epilog=_SCRIPT_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    serve.add_argument("--script", type=Path, default=None, metavar="S",
                       help="TOML script of replies (default: always answer "
                            "'hello from fake model')")
    serve.add_argument("--listen", default="127.0.0.1:0", metavar="HOST:PORT",
                       help="address to bind (default 127.0.0.1:0 = a free port, printed)")
    serve.add_argument("--record", type=Path, default=None, metavar="FILE",
                       help="append every request (method, path, headers without secrets, "
                            "body) to FILE as JSON lines")
    serve.add_argument("--text", default=None,
                       help="default reply text when no --script is given")
    serve.set_defaults(func=cmd_serve)
    return parser


def cmd_serve(args: argparse.Namespace) -> int:
    from trio_cap.actors.model_server.record import RecordError
    from trio_cap.actors.model_server.script import ScriptError, default_script, load_script
    from trio_cap.actors.model_server.server import (
        ListenError,
        parse_listen,
        serve_until_signalled,
    )

    try:
        host, port = parse_listen(args.listen)
    except ValueError as exc:
        print(f"cap model serve: {exc}", file=sys.stderr)
        return EXIT_USAGE
    try:
        if args.script is not None:
            script = load_script(args.script)
        else:
            script = default_script(args.text) if args.text else default_script()
    except ScriptError as exc:
        print(f"cap model serve: invalid script: {exc}", file=sys.stderr)
        return EXIT_USAGE
    try:
        return trio.run(serve_until_signalled, script, host, port, args.record)
    except (ListenError, RecordError) as exc:
        print(f"cap model serve: {exc}", file=sys.stderr)
        return EXIT_USAGE
