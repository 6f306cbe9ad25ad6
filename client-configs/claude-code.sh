#!/bin/sh
# Claude Code: register Mnemograph for every project of this user (stdio; one shared store).
claude mcp add --scope user mnemograph -- mnemograph serve

# Or a project-specific default scope (run inside the project):
# claude mcp add --scope project --env MNEMOGRAPH_DEFAULT_SCOPE=project:website mnemograph -- mnemograph serve

# Or connect to a running HTTP server (mnemograph serve --transport http):
# claude mcp add --transport http mnemograph-http http://127.0.0.1:8765/mcp
