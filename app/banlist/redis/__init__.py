"""The Redis-backed banlist store and its replication."""
