#!/bin/sh
# Checks the Debian packages colibri builds against; installs the missing ones
# when run as root, otherwise prints the exact apt-get line to run.
PKGS="build-essential libcjson-dev libpcre2-dev libxxhash-dev libmicrohttpd-dev"
missing=""
for p in $PKGS; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" -eq 0 ]; then
    echo "installing:$missing" >&2
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing
else
    echo "colibri needs these Debian packages:$missing" >&2
    echo "run:  sudo apt-get install -y$missing" >&2
    exit 1
fi
