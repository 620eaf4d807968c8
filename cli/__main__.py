"""``python -m cli`` runs the ``cdo`` command."""

from cli.main import main

raise SystemExit(main())
