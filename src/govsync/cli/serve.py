"""`govsync serve`: the reference server, in a module of its own so that its start
(the tests start hundreds, a user's CI one a job) does not load the other tools'
modules (the migration, the formatter, init and the docs: about 22 ms)."""

from __future__ import annotations

import click

from govsync.cli.root import out


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", default=8080, show_default=True, type=int, help="Port to listen on.")
@click.option("--db", default=":memory:", show_default=True, help="SQLite file, or :memory:.")
@click.option("--api-key", "api_keys", multiple=True, help="A key that may call every operation.")
@click.option("--viewer-key", "viewer_keys", multiple=True, help="A key that may call Get and List operations only.")
@click.option("--seed", type=click.Path(exists=True, dir_okay=False), help="YAML of resources, groups, users, links and logged requests (logs:, what impact reports evaluate) to preload.")
@click.option("--latency-ms", default=0, type=click.IntRange(min=0), help="Delay every response.")
@click.option("--fault-rate", default=0.0, type=click.FloatRange(0.0, 1.0), help="Fraction of write calls (creates, updates, deletes) that fail.")
@click.option("--operations", default="all", show_default=True, type=click.Choice(["all", "spec"]),
              help="spec: only api-spec.md's operations (every other one is 404), as an "
                   "endpoint without the reads, updates and deletes of api-lifecycle.md.")
@click.option("-v", "--verbose", count=True, help="Log every request (also: govsync -v serve).")
def serve(
    host: str,
    port: int,
    db: str,
    api_keys: tuple[str, ...],
    viewer_keys: tuple[str, ...],
    seed: str | None,
    latency_ms: int,
    fault_rate: float,
    operations: str,
    verbose: int,
) -> None:
    """Run the reference implementation of the control API.

    Says where it listens on stderr once it does; with -v, one line per
    request (method, path, status, milliseconds).

    \b
    Example:
      govsync serve --port 8080 --db api.db --api-key dev-key --seed examples/server-seed.yaml
    """
    from govsync.server.serve import run

    run(
        host=host,
        port=port,
        db=db,
        api_keys=list(api_keys),
        viewer_keys=list(viewer_keys),
        seed=seed,
        latency_ms=latency_ms,
        fault_rate=fault_rate,
        operations=operations,
        verbose=verbose + out().verbose > 0,
    )
