"""Reference models: the Python implementations the engine replaces, kept runnable."""
