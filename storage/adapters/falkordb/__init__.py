"""The canonical store on a FalkorDB server (scale-out mode, docs/scale-out.md)."""

from storage.adapters.falkordb.store import FalkorAddress, FalkorStore, parse_url

__all__ = ["FalkorAddress", "FalkorStore", "parse_url"]
