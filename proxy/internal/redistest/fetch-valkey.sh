#!/usr/bin/env bash
# fetch-valkey.sh DIR — a Redis 7.2-compatible server for the fsync tests
# (WAITAOF), on a Debian bookworm machine whose redis-server is 7.0:
# Valkey from Debian trixie, downloaded with apt through a package list of
# its own under DIR (the system's sources, lists and packages are not
# touched), unpacked with dpkg -x, and run through trixie's own glibc
# loader (the binary needs GLIBC_2.38; bookworm has 2.36). Prints
#   export CALLOUT_TEST_REDIS72_SERVER=DIR/valkey-server
# on stdout (proxy/proctest.EnvServer72); progress on stderr.
set -euo pipefail
DIR=$(mkdir -p "$1" && cd "$1" && pwd)
mkdir -p "$DIR/lists/partial" "$DIR/cache/archives/partial" "$DIR/debs" "$DIR/root"
# The machine's own Debian mirror (the one serving bookworm/main), suite trixie.
mirror=$(apt-cache policy | grep -m1 -oE 'https?://[^ ]+ bookworm/main' | cut -d' ' -f1)
[ -n "$mirror" ] || { echo "fetch-valkey.sh: no Debian mirror in /etc/apt" >&2; exit 1; }
echo "deb $mirror trixie main" >"$DIR/sources.list"
apt_opts=(-o "Dir::Etc::sourcelist=$DIR/sources.list" -o "Dir::Etc::sourceparts=-"
	-o "Dir::State::Lists=$DIR/lists" -o "Dir::Cache=$DIR/cache")
apt-get "${apt_opts[@]}" update >&2
(cd "$DIR/debs" && apt-get "${apt_opts[@]}" download valkey-server valkey-tools libc6 >&2)
for deb in "$DIR"/debs/*.deb; do dpkg -x "$deb" "$DIR/root"; done
lib="$DIR/root/usr/lib/x86_64-linux-gnu"
cat >"$DIR/valkey-server" <<WRAP
#!/bin/sh
exec "$lib/ld-linux-x86-64.so.2" --library-path "$lib:/lib/x86_64-linux-gnu" "$DIR/root/usr/bin/valkey-server" "\$@"
WRAP
chmod +x "$DIR/valkey-server"
"$DIR/valkey-server" --version >&2
echo "export CALLOUT_TEST_REDIS72_SERVER=$DIR/valkey-server"
