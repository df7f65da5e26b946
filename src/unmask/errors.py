"""One error type for bad input, so the CLI can print it as one line and exit 2."""


class UnmaskError(ValueError):
    """Invalid input or configuration; the message names the offending field."""


def require(condition: bool, message: str) -> None:
    """Raise :class:`UnmaskError` with ``message`` unless ``condition`` holds."""
    if not condition:
        raise UnmaskError(message)

