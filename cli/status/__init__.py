"""``cdo status``: domains, cliques and nodes at a glance.

Modules: ``report`` (the rows, built from API objects and events; pure), ``render`` (the rows
as text; pure), ``command`` (its arguments; reading both sources and printing).
"""

from cli.status.command import add_parser, run, status
from cli.status.render import render
from cli.status.report import DomainClique, DomainRow, Report, domain_row

__all__ = [
    "DomainClique",
    "DomainRow",
    "Report",
    "add_parser",
    "domain_row",
    "render",
    "run",
    "status",
]
