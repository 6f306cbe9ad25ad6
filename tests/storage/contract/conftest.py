"""The adapters under contract, and the fixtures that open them on real files in ``tmp_path``.

Every test in this package runs once per adapter. A new canonical store (say a server-based openCypher one)
plugs in by adding one ``CanonicalAdapter`` to ``CANONICAL``: how to open it for a test, and which
directories hold its bytes (for the erasure scans; a server's data directory, for a server). A new
projection adds one entry to ``PROJECTIONS``. Nothing else in the suite names an adapter.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from storage import CachedEmbedder
from storage.adapters.falkordb import FalkorStore
from storage.adapters.falkordb import local as falkordb_local
from storage.adapters.kuzu import GraphStore
from storage.adapters.lance_vectors import VectorIndex
from storage.adapters.tantivy_text import TextIndex
from storage.engine.core import EngineCore
from storage.ports.canonical import CanonicalStore
from storage.ports.embedder import Embedder
from storage.ports.projection import Projection
from storage.ports.stores import Stores


@dataclass(frozen=True)
class CanonicalAdapter:
    name: str
    open: Callable[[Path, Embedder], CanonicalStore]  # (a fresh or existing directory, the embedder) -> store
    roots: Callable[[Path], list[Path]]  # where the store keeps its bytes, for a directory given to ``open``


# The FalkorDB server of this test session (started by the ``falkordb_server`` fixture when a test asks for the
# adapter): each directory given to ``open`` gets its own graph on it, so reopening a directory reopens its graph.
_SERVERS: list[falkordb_local.LocalServer] = []


def _graph_of(d: Path) -> str:
    return "g" + hashlib.sha256(str(d.resolve()).encode()).hexdigest()[:16]


CANONICAL = [
    CanonicalAdapter(
        "kuzu",
        lambda d, emb: GraphStore(d / "graph", dim=emb.dim, embedder_name=emb.name),
        lambda d: [d / "graph"],
    ),
    CanonicalAdapter(
        "falkordb",
        lambda d, emb: FalkorStore(_SERVERS[0].url(_graph_of(d)), dim=emb.dim, embedder_name=emb.name),
        lambda d: [_SERVERS[0].directory],  # the server's AOF and RDB files
    ),
]


@pytest.fixture(scope="session")
def falkordb_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[falkordb_local.LocalServer]:
    """A real FalkorDB server on a free loopback port, its files (AOF, fsync always) in a tmp dir."""
    server = falkordb_local.start(tmp_path_factory.mktemp("falkordb"), compress=False)
    _SERVERS.append(server)
    try:
        yield server
    finally:
        _SERVERS.remove(server)
        server.stop()


PROJECTIONS: dict[str, Callable[[Path, int], Projection]] = {
    "lancedb": lambda d, dim: VectorIndex(d / "vectors", dim=dim),
    "tantivy": lambda d, dim: TextIndex(d / "text"),
}


@pytest.fixture(params=CANONICAL, ids=lambda a: a.name)
def adapter(request: pytest.FixtureRequest) -> CanonicalAdapter:
    if request.param.name == "falkordb":
        request.getfixturevalue("falkordb_server")
    return request.param  # type: ignore[no-any-return]


@pytest.fixture
def canonical(
    adapter: CanonicalAdapter, tmp_path: Path, embedder: CachedEmbedder
) -> Iterator[CanonicalStore]:
    store = adapter.open(tmp_path, embedder)
    try:
        yield store
    finally:
        store.close()


@pytest.fixture(params=sorted(PROJECTIONS))
def open_projection(request: pytest.FixtureRequest) -> Callable[[Path, int], Projection]:
    return PROJECTIONS[request.param]


@pytest.fixture
def open_engine(
    adapter: CanonicalAdapter, embedder: CachedEmbedder
) -> Iterator[Callable[[Path], EngineCore]]:
    """Opens an engine on ``data_dir`` with this canonical adapter and the LanceDB and Tantivy projections,
    wired as ``storage.compose`` wires them; every engine opened is closed at the end of the test."""
    opened: list[EngineCore] = []

    def open_(data_dir: Path) -> EngineCore:
        data_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(data_dir / "owner.lock", os.O_RDWR | os.O_CREAT, 0o600)
        stores = Stores(
            canonical=adapter.open(data_dir, embedder),
            vectors=VectorIndex(data_dir / "vectors", dim=embedder.dim),
            text=TextIndex(data_dir / "text"),
        )
        engine = EngineCore(data_dir, embedder, fd, stores)
        engine.start()
        opened.append(engine)
        return engine

    yield open_
    for engine in opened:
        engine.close()
