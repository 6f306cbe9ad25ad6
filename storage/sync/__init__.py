"""Keeping the stores in step: the reconciler (the single write path) and the projections' catch-up."""
