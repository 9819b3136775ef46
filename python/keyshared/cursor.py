"""The safe cursor (SPEC 8) and per-(segment, bucket) checkpoints built on it."""

from keyshared._core import BucketCheckpoints, SafeCursor

__all__ = ["BucketCheckpoints", "SafeCursor"]
