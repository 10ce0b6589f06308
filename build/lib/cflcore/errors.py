"""One exception type whose message is a single line naming the field or path at fault."""


class CflError(Exception):
    """A user-facing error: the message is one line that names the field, path or value and what is allowed."""

    def __init__(self, message: str):
        super().__init__(" ".join(str(message).split()))


class ConfigError(CflError):
    """Invalid configuration value (named by its dotted path)."""


class DataError(CflError):
    """Missing, truncated or corrupt input data."""


class TrainingDiverged(CflError):
    """A loss became NaN or infinite."""
