#!/bin/sh
# deps.sh -- installs the Debian packages tocha needs to build and test, without asking.
# Quiet and quick when everything is present.
set -e
pkgs="gcc g++ make pkg-config luajit libluajit-5.1-dev libopenblas-dev lua-busted libedit-dev zlib1g-dev"
[ -n "$TOCHA_EXTRA_DEPS" ] && pkgs="$pkgs $TOCHA_EXTRA_DEPS"
missing=""
for p in $pkgs; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
echo "deps: installing$missing"
sudo=""
[ "$(id -u)" = 0 ] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -q >/dev/null
$sudo apt-get install -y -q --no-install-recommends $missing >/dev/null
echo "deps: done"
