"""The installed ``cap-agent`` program, as the stream-json SDK tests find it."""

from tests.agent_stream_json.conftest import cap_agent

__all__ = ["cap_agent"]
