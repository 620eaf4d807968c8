"""``cdo ui``: a live page of every NVL72 rack, its trays and GPUs.

Modules: ``layout`` (racks, cliques and trays from the Nodes; pure), ``health`` (faults and tray
marks; pure), ``view`` (what the page draws; pure), ``domain`` (one domain's view), ``feed``
(the NATS event feed), ``cluster`` (the informers and the API's status), ``hub`` (the state and
its changes to every open page), ``server`` (aiohttp), ``command`` (its arguments); the page
itself is ``static/`` (HTML, CSS and JavaScript, served as they are). docs/ui.md explains it.
"""

from cli.ui.command import add_parser, run

__all__ = ["add_parser", "run"]
