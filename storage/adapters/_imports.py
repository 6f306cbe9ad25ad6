"""Import-time trims for the store libraries, applied before any adapter imports them (``storage.adapters``).

``import lancedb`` imports ``lance_namespace``, which imports the generated REST client of Lance's namespace
service, ``lance_namespace_urllib3_client``, whose package ``__init__`` loads every API class of that service
(hundreds of pydantic-validated methods, and urllib3). A local store uses none of it, and ``lance_namespace``
only needs the client's ``models`` subpackage. Measured in the owner before its first answer: 0.6 s of CPU and
14 MiB resident (docs/benchmarks/coldstart.md, "Footprint").

``defer_package_init`` registers such a package without running its ``__init__``: its submodules import as usual
(the package's ``__path__`` is set), and the first lookup of a name only the ``__init__`` defines runs it then,
so code that does use the REST client still works.
"""

from __future__ import annotations

import importlib.util
import sys
import threading

_LOCK = threading.Lock()


def defer_package_init(name: str) -> None:
    """Make ``name`` (a package not yet imported) importable without running its ``__init__`` until needed."""
    with _LOCK:
        if name in sys.modules:
            return
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None or spec.submodule_search_locations is None:
            return  # not installed, or not a package: nothing to defer
        module = importlib.util.module_from_spec(spec)
        loader = spec.loader
        state = {"ran": False}
        once = threading.Lock()

        def __getattr__(attr: str) -> object:
            with once:
                if not state["ran"]:
                    state["ran"] = True
                    del module.__dict__["__getattr__"]
                    loader.exec_module(module)
            try:
                return module.__dict__[attr]
            except KeyError:
                raise AttributeError(f"module {name!r} has no attribute {attr!r}") from None

        module.__dict__["__getattr__"] = __getattr__
        sys.modules[name] = module
