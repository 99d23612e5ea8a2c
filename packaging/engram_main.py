"""The frozen build's entry point: the same `engram` entry as a source or pip install (app/__main__.py)."""
import multiprocessing
import sys

from app.__main__ import main

if __name__ == "__main__":
    multiprocessing.freeze_support()  # a library that starts worker processes must not re-run the app
    sys.exit(main())
