"""The engine's use cases (writes, access, scopes, erasure, consistency, backup, audit) over the ports."""
