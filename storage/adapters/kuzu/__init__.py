"""The canonical store on embedded Kùzu: memories, scopes, entities and the change log in one graph file.

Split by concern like the port it implements (``storage.ports.canonical``): ``store`` (files, connections,
rebuild), ``reads``, ``writes``, ``exports``; ``_cypher`` holds the schema and statement plumbing.
"""

from storage.adapters.kuzu.store import GraphStore

__all__ = ["GraphStore"]
