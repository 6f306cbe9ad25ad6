"""Who is acting. Grants arrive with the access-control work; the domain already receives a principal."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Principal:
    """The caller of an operation: recorded as provenance on every memory it writes."""

    name: str
    client: str = ""


LOCAL_PRINCIPAL = Principal(name="local")
