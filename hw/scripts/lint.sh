#!/usr/bin/env bash
# verilator --lint-only -Wall over every module in hw/rtl, each file as its own top.
set -euo pipefail
cd "$(dirname "$0")/../rtl"
status=0
for f in *.v *.sv; do
  [ -e "$f" ] || continue
  top=$(sed -n 's/^\s*module\s\+\([A-Za-z0-9_]\+\).*/\1/p' "$f" | head -1)
  [ -n "$top" ] || continue
  if ! verilator --lint-only -Wall -I. --top-module "$top" ./*.v 2>&1; then
    echo "lint failed: $f ($top)" >&2
    status=1
  fi
done
[ "$status" = 0 ] && echo "lint clean: $(ls ./*.v 2>/dev/null | wc -l) files"
exit "$status"
