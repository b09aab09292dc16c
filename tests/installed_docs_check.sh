#!/usr/bin/env bash
# Installs the build into a scratch DESTDIR and checks that every relative link of an installed
# doc names an installed file (an operator reading /usr/share/doc/gpushare finds what it cites).
set -euo pipefail
build=$1
dest=$(mktemp -d)
trap 'rm -rf "$dest"' EXIT
DESTDIR=$dest cmake --install "$build" --prefix /usr >/dev/null
docdir=$dest/usr/share/doc/gpushare
[ -f "$docdir/daemon.md" ] || { echo "daemon.md is not installed in $docdir"; exit 1; }
python3 - "$docdir" <<'PY'
import os, re, sys
root = sys.argv[1]
missing = []
for dirpath, _, files in os.walk(root):
    for f in files:
        if not f.endswith(".md"):
            continue
        path = os.path.join(dirpath, f)
        for target in re.findall(r"\]\(([^)#\s]+)", open(path, encoding="utf-8").read()):
            if "://" in target or target.startswith("mailto:"):
                continue
            if not os.path.exists(os.path.normpath(os.path.join(dirpath, target))):
                missing.append(f"{os.path.relpath(path, root)} -> {target}")
if missing:
    print("links to files that are not installed:\n  " + "\n  ".join(missing))
    sys.exit(1)
print("every link of the installed docs resolves")
PY
