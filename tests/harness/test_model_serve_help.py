"""``cap model serve --help`` states the limits the server enforces, with the code's numbers."""

from __future__ import annotations

from tests.harness.serve_process import run_serve
from trio_cap.actors.model_server.app import MAX_BODY_BYTES, MAX_BUFFERED_BYTES, MAX_JSON_VALUES
from trio_cap.actors.model_server.script import MAX_SCRIPT_BYTES


def test_help_states_the_enforced_limits() -> None:
    result = run_serve(["--help"])
    assert result.returncode == 0 and not result.stderr
    text = " ".join(result.stdout.split())
    for needle in [
        f"request bodies up to {MAX_BODY_BYTES >> 20} MiB",
        f"{MAX_JSON_VALUES:,} JSON values",
        "HTTP 413",
        f"share {MAX_BUFFERED_BYTES >> 20} MiB",
        "HTTP 503",
        f"Scripts up to {MAX_SCRIPT_BYTES >> 20} MiB",
        "RE2",
        "already in use",
    ]:
        assert needle in text, needle
