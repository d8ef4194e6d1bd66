"""Fixtures: the real-agent harness's live model server and isolated peer environments."""

from tests.harness.conftest import model_server, peer  # noqa: F401 - re-exported fixtures
