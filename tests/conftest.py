"""Shared fixtures: the scripted model server is available to every test directory."""

pytest_plugins = ["actors.model_server.pytest_plugin"]
