"""The one error type for bad user input anywhere in memtrade.

It lives in the lowest package so every layer can raise it; the CLI turns it into one line
on stderr and exit status 2.
"""


class InputError(ValueError):
    """Bad input: the message is one line naming the file, key or layer and what was expected."""
