"""Shared fixtures: the scripted model server is available to every test directory."""

pytest_plugins = ["trio_cap.actors.model_server.pytest_plugin", "tests.pg_fixture"]
