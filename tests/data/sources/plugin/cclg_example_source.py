"""An example cclg source plugin: the notes of a plain text file, one ``id | text`` a line.

Installed as an entry point of the group ``cclg.sources`` (``example = cclg_example_source:NotesSource``),
it is the kind ``plugin`` with the id ``example``: ``cclg sources add plugin example``.
"""

import os
from pathlib import Path


class NotesSource:
    id = "example"

    def load(self):
        """Yield one record per note: ``content`` and a stable ``id`` (what a sync matches it by)."""
        notes = Path(os.environ.get("EXAMPLE_NOTES", "notes.txt"))
        for line in notes.read_text(encoding="utf-8").splitlines():
            note_id, _, text = line.partition(" | ")
            if text.strip():
                yield {"id": note_id.strip(), "content": text.strip(), "type": "project_fact", "trust": "trusted"}
