#!/bin/sh
# examples/data/fetch_text.sh -- fetch the English text for examples/char_lstm.lua into data/
# (git-ignored): Project Gutenberg's "The Adventures of Sherlock Holmes" (pg1661.txt, 595 KB),
# shipped as test data in Debian's golang-github-pierrec-lz4-dev package. Skips the download
# when the file is already there with the expected size.
set -e
cd "$(dirname "$0")/../.."
dest=data/pg1661.txt
size=594933
if [ -f "$dest" ] && [ "$(wc -c < "$dest")" -eq "$size" ]; then
   echo "fetch_text: $dest present"
   exit 0
fi
mkdir -p data
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "fetch_text: apt-get download golang-github-pierrec-lz4-dev (for testdata/pg1661.txt)"
(cd "$tmp" && apt-get download golang-github-pierrec-lz4-dev >/dev/null 2>&1) ||
   { echo "fetch_text: apt-get download failed" >&2; exit 1; }
dpkg -x "$tmp"/golang-github-pierrec-lz4-dev_*.deb "$tmp/x"
src=$(find "$tmp/x" -name pg1661.txt | head -n 1)
[ -n "$src" ] || { echo "fetch_text: pg1661.txt not found in the package" >&2; exit 1; }
got=$(wc -c < "$src")
[ "$got" -eq "$size" ] || { echo "fetch_text: pg1661.txt has $got bytes, expected $size" >&2; exit 1; }
cp "$src" "$dest"
echo "fetch_text: wrote $dest ($got bytes)"
