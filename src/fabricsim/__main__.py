"""``python -m fabricsim``: the command line, as the ``fabricsim`` script runs it."""

from fabricsim.cli.app import run

if __name__ == "__main__":
    run()
