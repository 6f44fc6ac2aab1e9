"""The one exception type the CLI turns into a clean message instead of a traceback."""


class UserError(Exception):
    """Bad input or a bad setting. The message says what is wrong and how to fix it."""
