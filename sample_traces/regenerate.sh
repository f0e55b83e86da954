#!/usr/bin/env bash
# Regenerate sample_traces/<study>/ from real runs of the collectors on this machine.
# Usage: sample_traces/regenerate.sh   (from anywhere; uses the repo's .venv when present)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(dirname "$here")"
tracehouse="${TRACEHOUSE:-$repo/.venv/bin/tracehouse}"
command -v "$tracehouse" >/dev/null || tracehouse=tracehouse
study="$(sed -n 's/^study *= *"\(.*\)"/\1/p' "$here/sweep.toml")"
out="$here/$study"
rm -rf "$out"
cd "$repo"
"$tracehouse" collect sample_traces/sweep.toml --out "sample_traces/$study" --timeout 600
du -sh "$out"
