"""Patch documents as pure functions on JSON trees: JSON patch (RFC 6902), JSON merge patch
(RFC 7386) and strategic merge patch; the write path and admission apply them."""
