"""Rearrange: post-ranking rule pipeline."""
from importlib.metadata import version as _version

# Written once, in crates/engine/Cargo.toml: maturin puts it in the package's metadata.
__version__ = _version("rearrange")
