"""``python -m vqs.cli``: the same command as ``vqs`` (and named so in help and completion)."""

from . import app

if __name__ == "__main__":
    app(prog_name="vqs")
