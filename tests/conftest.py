"""Shared fixtures: the scripted model server is available to every test directory, and
``autojump_clock`` waits for worker threads before it leaps (tests/autojump.py)."""

pytest_plugins = ["trio_cap.actors.model_server.pytest_plugin", "tests.pg_fixture",
                  "tests.autojump"]
