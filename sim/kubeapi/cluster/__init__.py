"""What a real cluster does beyond storing objects, built on the write path like any client:
garbage collection, namespace termination and CRD cleanup, and pod eviction under budgets."""
