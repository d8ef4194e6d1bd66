"""What every command module shares: exit codes and the usage error."""

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


class UsageError(Exception):
    """Bad usage or an invalid input file: printed, exit code 2."""
