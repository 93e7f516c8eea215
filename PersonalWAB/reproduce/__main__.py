"""`python -m PersonalWAB.reproduce ...` = `pwab reproduce ...`."""

from PersonalWAB.reproduce.cli import cli

if __name__ == "__main__":
    cli()
