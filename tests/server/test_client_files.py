"""Client config files: where each client's lives, JSONC, and the merge that keeps everything else."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from server._cli_parser import _sentence
from server._client_files import ClientFile, ClientFileError, client_file, merge, stdio_entry, write


def test_each_client_file_is_in_its_documented_place(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    assert client_file("claude-desktop").path == tmp_path / ".config/Claude/claude_desktop_config.json"
    assert client_file("claude-code").path == tmp_path / ".claude.json"
    assert client_file("claude-code", project_dir=tmp_path / "p").path == tmp_path / "p/.mcp.json"
    assert client_file("cursor").path == tmp_path / ".cursor/mcp.json"
    assert client_file("vscode", project_dir=tmp_path / "p") == ClientFile(
        "vscode", tmp_path / "p/.vscode/mcp.json", "servers", jsonc=True
    )
    with pytest.raises(ClientFileError, match="no per-project configuration"):
        client_file("claude-desktop", project_dir=tmp_path)


def test_jsonc_comments_and_trailing_commas_are_read_and_strings_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "mcp.json"
    path.write_text(
        '{\n  // a comment\n  "servers": {"a": {"url": "http://x//y", "note": "/* kept */",},},\n}\n'
    )
    result = merge(
        ClientFile("vscode", path, "servers", jsonc=True), "m", stdio_entry("vscode", ["/bin/m"], {})
    )
    document = json.loads(result.text)
    assert document["servers"]["a"] == {"url": "http://x//y", "note": "/* kept */"}
    assert document["servers"]["m"] == {"type": "stdio", "command": "/bin/m", "args": []}


def test_write_keeps_a_backup_and_the_mode(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    path.write_text('{"mcpServers": {}, "other": 1}')
    path.chmod(0o640)
    backup = write(merge(ClientFile("cursor", path, "mcpServers"), "m", {"command": "/bin/m", "args": []}))
    assert backup is not None
    assert backup.read_text() == '{"mcpServers": {}, "other": 1}'
    assert path.stat().st_mode & 0o777 == 0o640
    assert json.loads(path.read_text())["other"] == 1


def test_argparse_messages_become_sentences() -> None:
    assert _sentence("the following arguments are required: id, --confirm") == "ID and --confirm are missing"
    assert _sentence("argument --port: invalid int value: 'x'") == "--port needs a whole number, not 'x'"
    assert _sentence("argument --port: expected one argument") == "--port needs a value"
