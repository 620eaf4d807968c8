"""The exceptions the simulated IMEX programs raise on purpose.

ImexError
├── ImexConfigError     config.cfg or nodes_config.cfg cannot be used; names file, line and key
├── ImexStartError      the daemon could not start (address in use, TLS material unreadable ...)
└── CommandError        the command service could not be reached or answered nonsense
"""

from __future__ import annotations


class ImexError(Exception):
    """Base of every exception the simulated IMEX raises on purpose."""


class ImexConfigError(ImexError):
    """A configuration file that cannot be used.

    The message is complete on its own (file, line, key, what is wrong) because the process
    shells print it as the one line an operator sees before the exit.
    """


class ImexStartError(ImexError):
    """The daemon could not bring up its listeners or its TLS material."""


class CommandError(ImexError):
    """The command service of a daemon could not be reached, or its answer did not decode."""
