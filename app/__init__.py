"""Rearrange: post-ranking rule pipeline."""
