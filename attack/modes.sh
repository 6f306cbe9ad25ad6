#!/bin/sh
# File modes: data dir, store files, token file, backups, exports, client files holding a bearer token.
set -u
T=$(mktemp -d /tmp/atk8-modes-XXXX)
M=$PWD/.venv/bin/mnemograph
export HOME=$T/home MNEMOGRAPH_RUNTIME_DIR=$T/rt
mkdir -p $HOME
umask 022
D=$T/data
$M token create --data-dir $D --name a --grant team:a=w >/dev/null
$M scope create team:a --data-dir $D >/dev/null
$M setup http --data-dir $D --for claude-code --grant team:a=r --token-name cc >/dev/null 2>&1
$M setup http --data-dir $D --for cursor --grant team:a=r --token-name cur >/dev/null 2>&1
$M setup http --data-dir $D --for vscode --grant team:a=r --token-name vs >/dev/null 2>&1
mkdir -p $T/proj
$M setup http --data-dir $D --for vscode --project-dir $T/proj --grant team:a=r --token-name vsp >/dev/null 2>&1
$M setup http --data-dir $D --for claude-code --project-dir $T/proj --grant team:a=r --token-name ccp >/dev/null 2>&1
$M setup http --data-dir $D --config $T/custom.json --for cursor --grant team:a=r --token-name custom >/dev/null 2>&1
$M backup --data-dir $D $T/backup >/dev/null
$M export --data-dir $D -o $T/export.jsonl >/dev/null
$M export --data-dir $D --format markdown -o $T/md >/dev/null
echo "== files holding mg_ tokens, with modes"
grep -rl "mg_" $T 2>/dev/null | while read f; do stat -c '%a %n' "$f"; done
echo "== modes not 600/700 under data, backup, runtime, md"
find $D $T/backup $T/rt $T/md $T/export.jsonl \( -type f -o -type d -o -type s \) ! -perm 600 ! -perm 700 -printf '%m %p\n' 2>/dev/null | head
echo "== modes under HOME"
find $HOME $T/proj -printf '%m %p\n'
echo "== pre-existing 0644 client file, setup http twice (the second backs up a file holding the first token)"
H2=$T/home2; mkdir -p $H2; echo '{"mcpServers": {}}' > $H2/.claude.json; chmod 644 $H2/.claude.json
HOME=$H2 $M setup http --data-dir $D --for claude-code --grant team:a=r --token-name t1 >/dev/null 2>&1
HOME=$H2 $M setup http --data-dir $D --for claude-code --grant team:a=w --token-name t2 >/dev/null 2>&1
for f in $H2/.claude.json*; do stat -c '%a %n' "$f"; grep -c mg_ "$f"; done
ls -la $H2
