"""The embedded banlist store: an index in memory, a change log on disk."""
