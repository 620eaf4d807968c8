"""Schemas: structural pruning, defaulting and validation against OpenAPI v3, CEL rules,
the published schemas of the built-in kinds, and schema navigation for field ownership."""
