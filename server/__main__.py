"""``python -m server``: the same as the ``mnemograph`` command (front-ends start the owner this way)."""

from server.cli import main

raise SystemExit(main())
