"""``govsync import`` again into the folder it wrote (issue 43, finding 7): what it wrote
before is never rewritten or removed; new objects are added to an unedited (or only
added-to) file; an edited file is refused, named with the ways out (--out a new folder,
or --merge: new files beside it)."""

from __future__ import annotations

from pathlib import Path

import yaml
from refreshkit import Gov


def console_space(gov: Gov, name: str) -> str:
    space: dict[str, str] = gov.call("CreateSpace", {"name": name})["space"]
    return space["id"]


def addresses(folder: Path) -> list[str]:
    found = []
    for path in sorted(folder.glob("*.yaml")):
        found += [f"{d['kind']}/{d['metadata']['name']}"
                  for d in yaml.safe_load_all(path.read_text()) if d and d["kind"] != "Import"]
    return found


def test_a_reimport_adds_to_its_folder_and_refuses_an_edited_file(sqlite_gov: Gov) -> None:
    gov = sqlite_gov
    console_space(gov, "first")
    gov.ok("import", "--kind", "Space", "--out", "imported")
    gov.ok("apply", "imported", "--auto-approve")
    folder = gov.folder / "imported"
    spaces = folder / "space.yaml"
    assert "Space/first" in addresses(folder)

    # Unedited: the new space is added; the first one's manifest stays.
    second = console_space(gov, "second")
    done = gov.ok("import", "--kind", "Space", "--out", "imported")
    assert "Imported 1 object into imported" in done.out, done
    assert addresses(folder).count("Space/first") == 1 and "Space/second" in addresses(folder)
    plan = gov.ok("plan", "imported", "--format", "json").json()
    assert plan["summary"]["import"] == 1 and plan["summary"]["orphan"] == 0, plan["summary"]
    assert plan["summary"]["create"] == 0
    gov.ok("apply", "imported", "--auto-approve")
    assert gov.entries()["Space/second"]["id"] == second

    # Only added to at its end (a hand-written space): still ours to add to.
    spaces.write_text(spaces.read_text() + "---\napiVersion: govsync/v1\nkind: Space\n"
                      "metadata: {name: by-hand}\nspec: {}\n")
    console_space(gov, "third")
    gov.ok("import", "--kind", "Space", "--out", "imported")
    assert {"Space/by-hand", "Space/third"} <= set(addresses(folder))

    # Edited in the middle: refused, naming the file and the ways out; nothing written.
    spaces.write_text(spaces.read_text().replace("name: first", "name: first  # ours", 1))
    console_space(gov, "fourth")
    before = {p.name: p.read_text() for p in folder.iterdir()}
    refused = gov.run("import", "--kind", "Space", "--out", "imported")
    assert refused.code == 1, refused
    assert (f"Error: {Path('imported') / 'space.yaml'}: edited since govsync import wrote it "
            "(not only added to at its end), and the new objects would go in it: run it "
            "again with --out NEW_FOLDER (plan reads both folders), or with --merge") \
        in refused.err, refused
    assert {p.name: p.read_text() for p in folder.iterdir()} == before
    # --merge: a new file beside the edited one, which is left as it is.
    gov.ok("import", "--kind", "Space", "--out", "imported", "--merge")
    assert spaces.read_text() == before["space.yaml"]
    assert [a for a in addresses(folder) if a == "Space/fourth"] == ["Space/fourth"]
    assert (folder / "space-2.yaml").exists()
    plan = gov.ok("plan", "imported", "--format", "json").json()
    assert plan["summary"]["import"] == 2 and plan["summary"]["create"] == 1  # by-hand
    assert plan["summary"]["orphan"] == 0

    # A manifest written by hand for an object the console made: its Import only.
    fifth = console_space(gov, "fifth")
    (folder / "mine.yaml").write_text("apiVersion: govsync/v1\nkind: Space\n"
                                      "metadata: {name: fifth}\nspec: {}\n")
    gov.ok("import", "--kind", "Space", "--out", "imported", "--merge")
    assert addresses(folder).count("Space/fifth") == 1
    plan = gov.ok("plan", "imported", "--format", "json").json()
    (change,) = [c for c in plan["changes"] if c["address"] == "Space/fifth"]
    assert change["action"] == "import" and change["id"] == fifth, change
