"""The HTTP face: the aiohttp application, request paths, discovery and OpenAPI documents,
protobuf request bodies and fault injection. It turns requests into calls on the reads, writes
and cluster layers and never holds API semantics itself."""
