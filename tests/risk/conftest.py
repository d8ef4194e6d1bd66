"""The real-agent fixtures (scripted model server, pinned peers) for the risk tests."""

from tests.driver_stream_json.conftest import claude  # noqa: F401 - re-exported fixture
from tests.harness.conftest import model_server, peer  # noqa: F401 - re-exported fixtures
