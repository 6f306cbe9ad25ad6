#!/bin/sh
# Claude Code: register Mnemograph for every project of this user (stdio; your personal memory, shared with
# your other clients). `mnemograph setup claude-code` writes the same entry, with the absolute path; by hand,
# write that path (e.g. /path/to/checkout/.venv/bin/mnemograph) where `mnemograph` is not on PATH.
claude mcp add --scope user mnemograph -- mnemograph serve

# Opt one project into its own scope, placed inside your personal one (recall there reads both); run inside
# the project, after `mnemograph scope create project:website --parent user:$(id -un)`:
# claude mcp add --scope project --env MNEMOGRAPH_DEFAULT_SCOPE=project:website mnemograph -- mnemograph serve

# Or connect to a running HTTP server (mnemograph serve --transport http) with a token from
# `mnemograph token create --name claude-code --grant user:$(id -un)=w` (`mnemograph setup http` prints this line):
# claude mcp add --transport http --scope user mnemograph-http http://127.0.0.1:8765/mcp --header "Authorization: Bearer PASTE-THE-TOKEN"
