"""``python -m vqs.server [vqs serve options]``: same as ``vqs serve``."""

from ..cli import app

if __name__ == "__main__":
    import sys

    app(["serve", *sys.argv[1:]], prog_name="vqs")
