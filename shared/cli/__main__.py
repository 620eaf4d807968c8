"""``python -m shared.cli`` runs the ``cdo`` command."""

from shared.cli.main import main

raise SystemExit(main())
