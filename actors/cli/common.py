"""What every command module shares: exit codes and the usage error."""

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


class UsageError(Exception):
    """Bad usage or an invalid input file: printed, exit code 2."""


def brain_script(path: str | None):  # -> Script | None
    """The scripted brain's script named on the command line; an invalid one is a usage error."""
    from trio_cap.actors.agent.script import ScriptError, load_script

    if not path:
        return None
    try:
        return load_script(path)
    except ScriptError as exc:
        raise UsageError(str(exc)) from None
