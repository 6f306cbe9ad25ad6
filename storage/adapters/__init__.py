"""Store adapters: the only code that imports kuzu, lancedb and tantivy. Wired by storage.compose."""

from storage.adapters._imports import defer_package_init

# Before any adapter imports lancedb: a local store never uses Lance's REST namespace client (see _imports).
defer_package_init("lance_namespace_urllib3_client")
