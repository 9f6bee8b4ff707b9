"""``python -m vqs.server [vqs serve options]``: same as ``vqs serve``."""

from .run import main

if __name__ == "__main__":
    main()
