"""Reference models: the Python implementations the engine replaced, kept runnable for the
property tests."""
