"""The engine's use cases (writes, access, scopes, erasure, consistency, backup, audit) over the ports.

``EngineCore`` takes its stores as ports; ``storage.compose.Engine`` is the same opened on a data directory.
"""
