"""Reference models: the pure-Python implementations the engine replaced, for property tests."""
