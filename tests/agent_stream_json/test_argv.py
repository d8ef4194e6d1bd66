"""Claude Code's command line as the SDKs write it, and the manifest ``cap agent`` prints."""

from __future__ import annotations

import pytest

from trio_cap.actors.bindings.stream_json.agent_argv import OptionsError, parse_claude_argv
from trio_cap.actors.cli.agent_cmd import manifest_text
from trio_cap.actors.manifest import parse_manifest
from trio_cap.actors.manifest.select import offered_bindings

PYTHON_SDK_ARGV = [  # stream-json.md §4.3, as claude-agent-sdk 0.2.189 writes it
    "--output-format", "stream-json", "--verbose", "--system-prompt", "",
    "--allowedTools", "Bash,Write", "--max-turns", "4", "--max-budget-usd", "0.5",
    "--model", "m1", "--permission-prompt-tool", "stdio", "--permission-mode", "acceptEdits",
    "--resume=abc", "--session-id=s-1", "--setting-sources=", "--include-partial-messages",
    "--add-dir", "/x", "--mcp-config", '{"mcpServers":{}}', "--thinking", "adaptive",
    "--input-format", "stream-json",
]
TS_SDK_ARGV = [  # §5: flags in --flag=value form, no --system-prompt
    "--output-format", "stream-json", "--verbose", "--input-format", "stream-json",
    "--thinking=adaptive", "--max-turns=3", "--model=m2", "--permission-prompt-tool=stdio",
    "--permission-mode=plan", "--setting-sources=", "--some-future-flag=1",
]


def test_the_python_sdks_command_line():
    o = parse_claude_argv(PYTHON_SDK_ARGV, cwd="/w")
    assert (o.output_format, o.input_format) == ("stream-json", "stream-json")
    assert o.system_prompt is None  # "" means none
    assert o.allowed_tools == ("Bash", "Write")
    assert (o.max_turns, o.budget_usd, o.model) == (4, 0.5, "m1")
    assert o.prompts_on_stdio and o.permission_mode == "acceptEdits"
    assert (o.resume, o.session_id) == ("abc", "s-1")
    assert o.partial_messages and o.prompt is None and o.cwd == "/w"


def test_the_typescript_sdks_command_line():
    o = parse_claude_argv(TS_SDK_ARGV)
    assert (o.max_turns, o.model, o.permission_mode) == (3, "m2", "plan")
    assert o.prompts_on_stdio
    assert any("--some-future-flag" in w for w in o.warnings)


def test_unknown_flags_with_and_without_values_are_tolerated():
    o = parse_claude_argv(["--brand-new", "value", "--other", "--model", "m", "--x=y", "-p",
                           "--", "the prompt"])
    assert o.model == "m" and o.prompt == "the prompt"
    assert len(o.warnings) == 3


def test_version_help_and_manifest_flags():
    assert parse_claude_argv(["-v"]).show_version
    assert parse_claude_argv(["--version"]).show_version
    assert parse_claude_argv(["--help"]).show_help
    assert parse_claude_argv(["--cap-manifest"]).show_manifest


def test_a_bad_value_for_a_known_flag_is_an_error():
    with pytest.raises(OptionsError, match="--max-turns"):
        parse_claude_argv(["--max-turns", "many"])
    with pytest.raises(OptionsError, match="--permission-mode"):
        parse_claude_argv(["--permission-mode=sideways"])
    with pytest.raises(OptionsError, match="expected a value"):
        parse_claude_argv(["--model"])


def test_allowed_tool_rules_keep_their_commas():
    o = parse_claude_argv(["--allowedTools", "Bash(git add:*),Write", "--disallowedTools",
                           "Edit Bash(rm:*)"])
    assert o.allowed_tools == ("Bash(git add:*)", "Write")
    assert o.disallowed_tools == ("Edit", "Bash(rm:*)")


def test_the_printed_manifest_validates_and_offers_what_this_build_speaks():
    m = parse_manifest(manifest_text(), "cap agent --cap-manifest")
    assert m.agent.name == "cap-agent"
    assert offered_bindings(m) == ("inproc", "stream-json", "acp", "pty")
    assert m.fast_path.stream_json == ("cap", "agent", "--cap-speak", "stream-json")
    assert m.fast_path.acp_stdio == ("cap", "agent", "--cap-speak", "acp")
    assert set(m.capabilities.coding.artifacts) == {"diff", "transcript"}
    assert not m.capabilities.coding.fs.any_enabled()
