"""Ports: the typed interfaces the engine, sync and recall use. Adapters implement them."""
