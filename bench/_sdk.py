"""The MCP SDK's client, for benchmark scripts run from this folder.

Run as a script, a benchmark has this folder first on ``sys.path``, where ``bench/mcp.py`` would shadow the SDK
package ``mcp``: import the SDK with this folder left out, once (later imports find it in ``sys.modules``).
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

_HERE = Path(__file__).resolve().parent
_saved = list(sys.path)
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
try:
    _client = importlib.import_module("mcp")
    _types = importlib.import_module("mcp.types")
finally:
    sys.path[:] = _saved

Client = _client.Client
Implementation = _types.Implementation

__all__ = ["Client", "Implementation"]
