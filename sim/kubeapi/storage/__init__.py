"""What is stored and where: the versioned object store with its event windows, and the
registry of served resource types with their per-kind rules and table columns."""
