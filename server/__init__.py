"""The composition root: settings, the CLI, the process model (owner, stdio and HTTP front-ends), the MCP server.

Kept empty on purpose: ``mnemograph serve`` imports this package on its fast path.
"""
