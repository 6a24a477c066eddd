"""Near-duplicate detection by word shingles (seed 000): `rearrange dupes`."""
