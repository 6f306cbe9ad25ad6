"""Store adapters: the only code that imports kuzu, lancedb and tantivy. Wired by storage.compose."""
