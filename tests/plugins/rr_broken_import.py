"""A plugin whose import fails."""
raise ImportError("needs a package that is not installed")
