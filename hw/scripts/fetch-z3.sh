#!/usr/bin/env bash
# Fetches the z3 solver the formal proofs prefer (hw/scripts/formal.sh) into
# target/tools/z3-<version>/z3: the release Microsoft publishes on PyPI (package z3-solver),
# pinned by version and by the wheel's SHA-256.
#
# Why not Debian's: Debian 12's z3 (4.8.12) answers the host DMA engine's queries about four
# times slower (its k-induction 510 s against 119 s; bmc 126 s against 35 s; cover 262 s
# against 24 s), and the test suite has 30 minutes. formal.sh falls back to the z3 on PATH
# when this one is missing, with a note, so a machine without PyPI still runs every proof.
#
# Usage: hw/scripts/fetch-z3.sh        prints the solver's path; exits non-zero if it cannot
#                                      fetch it (no pip, no network, another architecture)
set -euo pipefail

version=4.13.0
wheel_version=4.13.0.0
# The manylinux2014 x86_64 wheel of z3-solver 4.13.0.0 on PyPI.
sha256=8c42de82b6e3ff7ee61287d03c7af8a99f9f6554cdd1204c6b9bca96ff1cb7fb

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
top_dir="$(cd "$here/../.." && pwd)"
dest="$top_dir/target/tools/z3-$version"

if [ -x "$dest/z3" ]; then
    echo "$dest/z3"
    exit 0
fi
if [ "$(uname -m)" != x86_64 ]; then
    echo "fetch-z3.sh: only the x86_64 wheel is pinned (this machine is $(uname -m))" >&2
    exit 1
fi
if ! python3 -m pip --version >/dev/null 2>&1; then
    echo "fetch-z3.sh: python3 -m pip is missing (apt-get install python3-pip)" >&2
    exit 1
fi

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
printf 'z3-solver==%s --hash=sha256:%s\n' "$wheel_version" "$sha256" >"$tmp/requirements.txt"
# pip checks the hash (--require-hashes is implied by a hash in the requirements file).
python3 -m pip download --quiet --no-deps --only-binary=:all: \
    --platform manylinux2014_x86_64 --python-version 3 \
    -r "$tmp/requirements.txt" -d "$tmp/wheel" >&2
whl="$(ls "$tmp"/wheel/*.whl)"
echo "$sha256  $whl" | sha256sum --check --quiet >&2
# The wheel is a zip; the solver is a static-enough executable inside it (libc and libstdc++).
python3 - "$whl" "$tmp/x" <<'EOF'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    names = [n for n in z.namelist() if n.endswith("/bin/z3")]
    if len(names) != 1:
        sys.exit("fetch-z3.sh: no bin/z3 in the wheel")
    with z.open(names[0]) as src, open(sys.argv[2], "wb") as dst:
        dst.write(src.read())
EOF
chmod 755 "$tmp/x"
if ! "$tmp/x" --version | grep -q "Z3 version $version"; then
    echo "fetch-z3.sh: the fetched solver does not run or is not z3 $version" >&2
    exit 1
fi
mkdir -p "$dest"
mv "$tmp/x" "$dest/z3"
echo "$dest/z3"
