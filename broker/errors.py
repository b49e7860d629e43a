"""The broker's configuration error (its own module: protocol.py and config.py both raise it)."""


class ConfigError(ValueError):
    """A configuration value is unknown or malformed (exit status 2)."""
