"""The read path: LIST with pagination and resourceVersion rules, WATCH streams, and the
Table and PartialObjectMetadata representations of what is read."""
