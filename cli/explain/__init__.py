"""``cdo explain``: why a domain or pod waits or is Degraded.

Modules: ``facts`` (what is read, as data), ``reasons`` (every reason the services give and
what it means), ``explain`` (facts -> explanation; pure), ``render`` (the explanation as text;
pure), ``collect`` (reading the facts from the API and NATS), ``command`` (arguments, printing).
"""

from cli.explain.command import add_parser, run
from cli.explain.explain import Explanation, Finding, explain
from cli.explain.facts import DomainFacts
from cli.explain.reasons import MEANINGS, Topic

__all__ = [
    "MEANINGS",
    "DomainFacts",
    "Explanation",
    "Finding",
    "Topic",
    "add_parser",
    "explain",
    "run",
]
