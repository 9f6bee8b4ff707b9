"""``python -m vqs.cli``: the same command as ``vqs``."""

from . import app

if __name__ == "__main__":
    app()
