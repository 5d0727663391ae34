"""Enrichment for a pre-defined schema."""

from memory_agent.graph import graph

__all__ = ["graph"]
