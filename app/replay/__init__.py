"""Captured requests and `rearrange replay` of them against a candidate config."""
