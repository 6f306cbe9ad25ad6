"""Recall lanes: each returns ranked memory ids for a query, within the allowed scopes."""
