"""Moving in from Terraform: ``govsync migrate terraform`` (contract section 10).

    terraform.py  a Terraform state (format version 4), read strictly
    formal.py     the provider's resource types: one row each (kind, attributes,
                  nested blocks, schema-version upgrades)
    convert.py    instances to govsync objects: names, secrets, references
    yamlout.py    manifests as deterministic YAML
    report.py     MIGRATION.md and terraform-state-rm.sh
    writer.py     the folder: checked whole, then written (or refused)

``migrate_terraform`` is the one entry point: state in, folder out.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from govsync.errors import MigrateError
from govsync.migrate.convert import Conversion, convert
from govsync.migrate.terraform import read_source, read_state
from govsync.migrate.writer import Written, check, render, write


@dataclass
class Migration:
    """What a migration did."""

    conversion: Conversion
    written: Written
    variables: list[str] = field(default_factory=list)
    ownerless: list[str] = field(default_factory=list)


def migrate_terraform(source: str, out: str, *, owner_group: str | None = None) -> Migration:
    """Migrate the Terraform state in ``source`` (a file, or ``-``: standard input) into
    the folder ``out``.  MigrateError lists every problem; then nothing is written."""
    if owner_group is not None and not owner_group.strip():
        raise MigrateError(["--owner-group: must be a group's name, not empty"])
    state = read_state(read_source(source), source)
    conversion = convert(state, owner_group)
    if conversion.problems:
        raise MigrateError([*conversion.problems, "nothing was written"])
    output = render(state, conversion, out.rstrip("/") or out)
    check(output)
    written = write(out, output)
    return Migration(conversion, written,
                     variables=[s.variable for m in conversion.migrated for s in m.secrets],
                     ownerless=[m.address for m in conversion.migrated if m.owner_missing])


__all__ = ["Migration", "migrate_terraform"]
