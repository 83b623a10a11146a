"""Artifact format: records, canonical hashing, store layout and bundle reader/writer.

Defined in the runtime package so that the runtime can read what the builder writes with
its own (light) dependencies; the builder imports these definitions, never the reverse.
"""
