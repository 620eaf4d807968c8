"""``cdo preflight``: whether a cluster is ready for cdo, before and after it is installed.

:mod:`.gather` reads (the only I/O), :mod:`.facts` is what it read, :mod:`.checks` judges it
(pure; the list of checks is in its docstring), :mod:`.render` prints, :mod:`.command` has the
command line. docs/cli.md describes the command.
"""

from cli.preflight.command import add_parser, run

__all__ = ["add_parser", "run"]
