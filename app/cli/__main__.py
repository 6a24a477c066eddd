"""`python -m app.cli`: the same as the `rearrange` command."""
from app.cli.main import main

if __name__ == "__main__":
    raise SystemExit(main())
