"""User-facing errors. Anything raised as `UserError` is reported as one line and exit status 2."""

from __future__ import annotations


class UserError(Exception):
    """Bad input from the user (config, data, paths). The message names what is wrong and where."""

    exit_code = 2

    def __init__(self, message: str, *, where: str | None = None):
        self.where = where
        super().__init__(f"{where}: {message}" if where else message)


class ConfigError(UserError):
    """An unknown config key or an invalid value."""


class DataError(UserError):
    """A malformed dataset row or file; `where` is `file:line` and the message names the field."""
