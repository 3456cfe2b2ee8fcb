"""The one error type that commands report as a single line instead of a traceback."""


class UserError(Exception):
    """Bad input from the person running a command: reported as one line, exit status 2."""
