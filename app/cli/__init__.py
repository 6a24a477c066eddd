"""The `rearrange` command line; every call to a running service goes through client.py."""
