"""Tenet: four invariant-first business systems in one service on PostgreSQL."""

__version__ = "0.1.0"
