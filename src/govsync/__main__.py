"""``python -m govsync`` and the ``govsync`` script (pyproject.toml's project.scripts).

The collector's thresholds are the ones ``govsync.cli.main`` sets for a plan's many
small objects, set here before the command line's imports: with the default ones,
the imports alone ran 34 collections (issue 31: 5-10 % of a validate).
"""

import gc

gc.set_threshold(50_000, 20, 100)

from govsync.cli import main  # noqa: E402

if __name__ == "__main__":
    main()
