"""``python -m resilientcc`` runs the ``rcc`` command line."""

from resilientcc.cli.app import main

if __name__ == "__main__":
    main()
