"""What a migration tells people: ``MIGRATION.md`` and ``terraform-state-rm.sh``.

Both are made of the conversion alone, so the same state gives the same
text byte for byte.  Neither holds a value of the state: names, addresses,
ids, attribute names and variable names only.
"""

from __future__ import annotations

from collections.abc import Iterable

from govsync.migrate.convert import Conversion, Migrated
from govsync.migrate.formal import PROVIDER, PROVIDER_VERSION
from govsync.migrate.terraform import State

IMPORTS_FILE = "imports.yaml"
REPORT_FILE = "MIGRATION.md"
SCRIPT_FILE = "terraform-state-rm.sh"
# Addresses per `terraform state rm` command (well under any command line's limit).
_RM_BATCH = 100
_GO_ON = " \\"  # a shell line continued on the next


def report(state: State, conversion: Conversion, out: str) -> str:
    """The text of MIGRATION.md; ``out`` is the folder as the user named it."""
    migrated, kept = conversion.migrated, conversion.kept
    secrets = [(m, s) for m in migrated for s in m.secrets]
    ownerless = [m for m in migrated if m.owner_missing]
    total = len(migrated) + len(kept)
    lines = [
        "# Moving from Terraform to govsync",
        "",
        f"Written by `govsync migrate terraform` from a Terraform state (format version 4, "
        f"serial {state.serial}, lineage `{_code(state.lineage or 'none')}`, Terraform "
        f"{_code(state.terraform_version or 'unknown')}) of {PROVIDER} resources "
        f"(read as provider {PROVIDER_VERSION} writes them). Running it again over the same "
        "state changes nothing here; no value of the state is written anywhere, only names, "
        "ids and the environment variables that hold the secrets.",
        "",
        f"**{len(migrated)} of {total}** {PROVIDER} resource instances are migrated. Each is "
        f"adopted by its id (`{IMPORTS_FILE}`): govsync's first apply creates nothing. "
        f"{len(kept)} {'stays' if len(kept) == 1 else 'stay'} in Terraform (see *Staying in "
        "Terraform*).",
        "",
        "## What to do",
        "",
    ]
    step = 1
    if secrets:
        lines.append(f"{step}. Set the {len(secrets)} environment variable"
                     f"{'s' if len(secrets) != 1 else ''} of *Secrets* below, where govsync "
                     "runs (a shell, or your CI's secret store).")
        step += 1
    if ownerless:
        lines.append(f"{step}. Give the {len(ownerless)} polic"
                     f"{'ies' if len(ownerless) != 1 else 'y'} of *Policies without an owner* "
                     "an owner: `groupName` (a group's name) or `userEmail`. `govsync validate` "
                     "points at each one until then.")
        step += 1
    lines += [
        f"{step}. `govsync validate {out}`: every manifest is valid.",
        f"{step + 1}. `govsync plan {out}`: every object is an import (`<`); nothing is "
        "created.",
        f"{step + 2}. `govsync apply {out}`: each object is recorded in govsync's state with its "
        "id. Kinds that the API updates whole (Hook, ConnectorAIProvider) are sent once, so the "
        "server matches the manifest.",
        f"{step + 3}. `govsync plan {out}` again: no changes.",
        f"{step + 4}. In the Terraform working directory, `sh {out}/{SCRIPT_FILE}`: Terraform "
        "forgets exactly the migrated resources (it deletes nothing). Then remove them from the "
        "Terraform configuration: `terraform plan` must not propose to create them again.",
        f"{step + 5}. `{IMPORTS_FILE}` may then be deleted: an applied Import changes nothing.",
        "",
    ]
    if secrets:
        lines += [
            "## Secrets",
            "",
            "Each secret is read from an environment variable (`{fromEnv: VARIABLE}` in the "
            "manifest). Where Terraform kept the value in its state it is not copied: take it "
            "from where your Terraform configuration reads it (variables, a vault).",
            "",
            "| variable | govsync field | Terraform attribute | in the Terraform state |",
            "|---|---|---|---|",
        ]
        lines += [f"| `{_cell(s.variable)}` | `{_cell(m.address)}` "
                  f"`spec.{_cell(_path(s.path))}` | `{_cell(m.instance.address)}` "
                  f"`{_cell(s.attribute)}` | "
                  f"{'yes' if s.in_state else 'no: write-only'} |" for m, s in secrets]
        lines.append("")
    if ownerless:
        lines += [
            "## Policies without an owner",
            "",
            "A Policy needs an owner, and this state has none for these (provider schema "
            "version 2 no longer keeps it). Set `groupName` or `userEmail` in each, or run "
            "this again with `--owner-group NAME`.",
            "",
        ]
        lines += [f"- `{_cell(m.address)}` (`{_cell(m.instance.address)}`)" for m in ownerless]
        lines.append("")
    lines += ["## Migrated", ""]
    if migrated:
        lines += ["| Terraform address | govsync address | id | notes |", "|---|---|---|---|"]
        lines += [f"| `{_cell(m.instance.address)}` | `{_cell(m.address)}` | `{_cell(m.id)}` | "
                  f"{_cell('; '.join(_notes(m)))} |" for m in migrated]
    else:
        lines.append("Nothing.")
    lines += ["", "## Staying in Terraform", ""]
    if kept:
        lines += ["| Terraform address | why |", "|---|---|"]
        lines += [f"| `{_cell(k.address)}` | {_cell(k.reason)} |" for k in kept]
    else:
        lines.append("Nothing: every resource instance of the provider is migrated.")
    lines += ["", "## Not looked at", ""]
    lines.append(f"- {state.data_sources} data source{'s' if state.data_sources != 1 else ''} "
                 "(nothing to migrate: they only read).")
    lines.append(f"- {conversion.others} resource instance{'s' if conversion.others != 1 else ''}"
                 f" of other providers: they stay in Terraform as they are.")
    if len(conversion.providers) > 1:
        lines.append(f"- **{len(conversion.providers)} configurations of the provider** ("
                     + ", ".join(f"`{_cell(p)}`" for p in sorted(conversion.providers))
                     + "): govsync applies a folder against one endpoint. If they are "
                     "different organisations, split the manifests by the Terraform address "
                     "in *Migrated* and give each its own endpoint and state.")
    return "\n".join(lines) + "\n"


def _notes(m: Migrated) -> list[str]:
    out = ["name made of the Terraform address"] if m.derived else []
    if m.owner_missing:
        out.append("needs an owner")
    return out + m.notes


def state_rm_script(migrated: Iterable[Migrated]) -> str:
    """The shell script that makes Terraform forget exactly the migrated instances."""
    addresses = [m.instance.address for m in migrated]
    lines = [
        "#!/bin/sh",
        "# Written by `govsync migrate terraform`: makes Terraform forget the resources that",
        f"# govsync now manages (see {REPORT_FILE}). Run it in the Terraform working directory",
        "# after the first `govsync apply`. It deletes nothing on the server.",
        "set -eu",
    ]
    if not addresses:
        lines.append("echo 'Nothing was migrated: nothing to remove from the Terraform state.'")
    for start in range(0, len(addresses), _RM_BATCH):
        batch = addresses[start:start + _RM_BATCH]
        lines.append("terraform state rm \\")
        lines += [f"  {_shell(a)}{_GO_ON if i < len(batch) - 1 else ''}"
                  for i, a in enumerate(batch)]
    return "\n".join(lines) + "\n"


def _shell(text: str) -> str:
    """One shell word, single-quoted."""
    return "'" + text.replace("'", "'\\''") + "'"


def _path(path: tuple[str | int, ...]) -> str:
    return ".".join(str(p) for p in path)


def _cell(text: str) -> str:
    """Text for a Markdown table cell: one line, no column separator, no backtick run."""
    return (text.replace("|", "\\|").replace("`", "'")
            .replace("\r", " ").replace("\n", " "))


def _code(text: str) -> str:
    return _cell(text)
