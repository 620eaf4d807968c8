"""The error a topology that cannot be used raises."""

from __future__ import annotations

from shared.errors import ConfigError


class TopologyError(ConfigError):
    """A topology file or spec that cannot be expanded.

    ``field`` is the path of the offending field as written in the file, for example
    ``racks[1].cliques[0].trays``; ``source`` names the file when there is one.
    """

    def __init__(self, field: str, problem: str, *, source: str | None = None) -> None:
        self.field = field
        self.problem = problem
        self.source = source
        where = f"{source}: {field}" if source else field
        super().__init__(f"{where}: {problem}")

    def in_source(self, source: str) -> TopologyError:
        """The same error, naming the file it came from."""
        return TopologyError(self.field, self.problem, source=source)
