"""``govsync state readonly-role R`` for a role that does not exist yet (issue 34,
item 8): piped to psql, it failed three times with `role "R" does not exist` and
psql exited 0.  Its first statement now stops the script with what to do, and the
documented pipe (``psql -v ON_ERROR_STOP=1``) exits non-zero at it."""

from __future__ import annotations

import shutil
import subprocess
import uuid

import psycopg
import pytest
from click.testing import CliRunner

from govsync.cli import cli
from testkit import reader_role


def grants(role: str, url: str) -> list[str]:
    result = CliRunner().invoke(cli, ["state", "readonly-role", role, "--state", url])
    assert result.exit_code == 0, result.output
    return result.stdout.strip().splitlines()


@pytest.mark.postgres
def test_a_role_that_does_not_exist_stops_the_script_naming_it(postgres_url: str) -> None:
    role = f"nobody_{uuid.uuid4().hex[:8]}"
    statements = grants(role, postgres_url)
    with (psycopg.connect(postgres_url, autocommit=True) as conn,
          pytest.raises(psycopg.errors.RaiseException) as raised):
        conn.execute(statements[0])
    assert (f'role {role} does not exist: CREATE ROLE "{role}" LOGIN PASSWORD \'...\' first'
            in str(raised.value))
    if shutil.which("psql"):
        done = subprocess.run(["psql", "-v", "ON_ERROR_STOP=1", postgres_url],
                              input="\n".join(statements), capture_output=True, text=True,
                              timeout=60)
        assert done.returncode != 0 and f"role {role} does not exist" in done.stderr


@pytest.mark.postgres
def test_an_existing_role_runs_every_statement(postgres_url: str) -> None:
    with reader_role(postgres_url, "rr") as made:
        made.grant("\n".join(grants(made.role, made.writer)))
        with psycopg.connect(made.reader, autocommit=True) as conn:
            assert conn.execute("SELECT count(*) FROM govsync_workspaces").fetchone() == (0,)
