"""The stream-json binding (Claude Code's ``--input-format/--output-format stream-json``).

Both directions share :mod:`~actors.bindings.stream_json.frames`: the driver
(``driver*.py``, ``connector.py``) drives agents that speak it, and the agent
side (``agent_*.py``) lets the Claude Agent SDKs drive trio-cap's own brain.
"""
