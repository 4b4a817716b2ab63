"""Reservation workflow (spec 003): AI ingest, orders, task queues, task cards, the OPERA adapter."""
