"""Settings, the rules YAML and its versions: what the engine is built from."""
