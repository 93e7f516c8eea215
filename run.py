"""Evaluate an agent on PersonalWAB: `python run.py --help`."""

import sys

from PersonalWAB.run import main

if __name__ == "__main__":
    sys.exit(main())
