#!/bin/sh
# Kill (SIGKILL, by pid) any owner daemon started from this worktree whose RSS passes $1 MiB (default 4096).
LIMIT=${1:-4096}
while true; do
  for p in $(pgrep -f "wt-attack8/.venv/bin/python -P -m server daemon"); do
    r=$(awk '/VmRSS/{print int($2/1024)}' /proc/$p/status 2>/dev/null)
    if [ -n "$r" ] && [ "$r" -gt "$LIMIT" ]; then echo "watchdog: killing $p at $r MiB" >&2; kill -9 $p; fi
  done
  sleep 0.5
done
