"""The Python side of the data plane: the one call per request into the Rust engine."""
