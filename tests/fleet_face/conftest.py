"""The installed ``cap-agent`` program (as the stream-json SDK tests find it) and the A2A
spelling under test (as the publisher's SDK tests parametrize it)."""

from tests.agent_stream_json.conftest import cap_agent
from tests.serve_a2a.conftest import spelling

__all__ = ["cap_agent", "spelling"]
