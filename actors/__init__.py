"""trio-cap's behaviour: the actor runtime, sessions, bindings, the agent brain and the CLI."""

__version__ = "0.1.0"
