#!/bin/sh
# fetch_digits.sh [DIR] -- puts scikit-learn's 8x8 digits (1,797 images, digits.csv.gz:
# 64 pixel columns 0..16 and the label) in DIR (default data/digits), once. Source: the
# Debian package python3-sklearn, unpacked without installing it (see shared/DATA.md).
set -e
dir="${1:-data/digits}"
[ -s "$dir/digits.csv.gz" ] && exit 0
mkdir -p "$dir"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
echo "fetch_digits: fetching the 8x8 digits (Debian package python3-sklearn, 2 MB) into $dir"
(cd "$tmp" && apt-get download -q python3-sklearn >/dev/null 2>&1) || {
    echo "fetch_digits: apt-get download python3-sklearn failed"; exit 1; }
dpkg -x "$tmp"/python3-sklearn_*.deb "$tmp/x"
cp "$(find "$tmp/x" -name digits.csv.gz | head -n 1)" "$dir/digits.csv.gz"
echo "fetch_digits: done"
