"""A stand-in for ``codex app-server`` in the install tests: answers ``initialize`` and ``hooks/list``
over JSON lines on stdin and stdout, the way Codex 0.171 does (the host tests ask the real one).

Hooks come from $CODEX_HOME/hooks.json (else ~/.codex) and, for a project the user's config.toml
trusts, from the working folder's .codex/hooks.json. A hook's hash is sha256 of its command; it is
trusted when config.toml's [hooks.state."<key>"] trusted_hash matches. FAKE_CODEX=silent never
answers; FAKE_CODEX=exit exits at once."""

import hashlib
import json
import os
import re
import sys
import tomllib
from pathlib import Path

mode = os.environ.get("FAKE_CODEX", "")
if sys.argv[1:] != ["app-server"] or mode == "exit":
    sys.exit(2)
home = Path(os.environ.get("CODEX_HOME") or Path.home() / ".codex")
config = tomllib.loads((home / "config.toml").read_text()) if (home / "config.toml").exists() else {}
states = config.get("hooks", {}).get("state", {})
cwd = Path.cwd()
files = [home / "hooks.json"]
if config.get("projects", {}).get(str(cwd), {}).get("trust_level") == "trusted":
    files.append(cwd / ".codex" / "hooks.json")


def hooks():
    for path in files:
        if not path.exists():
            continue
        for event, groups in json.loads(path.read_text())["hooks"].items():
            snake = re.sub(r"(?<!^)([A-Z])", r"_\1", event).lower()
            for g, group in enumerate(groups):
                for i, handler in enumerate(group["hooks"]):
                    key = f"{path}:{snake}:{g}:{i}"
                    digest = "sha256:" + hashlib.sha256(handler["command"].encode()).hexdigest()
                    trusted = states.get(key, {}).get("trusted_hash") == digest
                    yield {
                        "key": key,
                        "command": handler["command"],
                        "sourcePath": str(path),
                        "currentHash": digest,
                        "trustStatus": "trusted" if trusted else "untrusted",
                    }


for line in sys.stdin:
    message = json.loads(line)
    if mode == "silent" or "id" not in message:
        continue
    if message["method"] == "initialize":
        result = {"userAgent": "fake", "codexHome": str(home)}
    else:
        result = {"data": [{"cwd": str(cwd), "hooks": list(hooks()), "warnings": [], "errors": []}]}
    print(json.dumps({"method": "configWarning", "params": {"summary": "noise before the answer"}}), flush=True)
    print(json.dumps({"id": message["id"], "result": result}), flush=True)
