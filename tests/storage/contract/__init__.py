"""The ports' contract suite: every adapter passes the same tests (see conftest.py to add one)."""
