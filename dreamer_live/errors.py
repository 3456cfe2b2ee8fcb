"""The error types that commands report as a single line instead of a traceback, and a hint."""

import difflib


class UserError(Exception):
    """Bad input from the person running a command: reported as one line, exit status 2."""


class RunFailure(Exception):
    """A run stopped by a fault that is not the command's input (an env that raised): reported as
    one line, exit status 1; the line says where the details are."""


def did_you_mean(name, candidates, cutoff: float = 0.5) -> str:
    """" (did you mean 'x'?)" for the candidate closest to `name`, or "" when none is close enough."""
    match = difflib.get_close_matches(str(name), [str(c) for c in candidates], n=1, cutoff=cutoff)
    return f" (did you mean '{match[0]}'?)" if match else ""
