"""Benchmarks. Run one as ``python -m bench.<name>`` from the project root (``./task bench`` runs
them all); each prints a table and ends with one ``RESULT key=value ...`` line."""
