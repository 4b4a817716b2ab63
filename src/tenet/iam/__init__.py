"""Identity: users, roles and permission points, API clients, tokens (shared by every system)."""
