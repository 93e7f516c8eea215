"""Leaderboard tools for PersonalWAB result files: validate, summarize, plot, report, pack.

Run `python -m PersonalWAB.leaderboard --help`. Importing this package is light:
plotting (matplotlib) is loaded only when a figure is drawn.
"""

from PersonalWAB.leaderboard.summarize import summarize_files
from PersonalWAB.leaderboard.validate import validate_file

__all__ = ["summarize_files", "validate_file"]
