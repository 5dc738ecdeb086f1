#!/usr/bin/env bash
# make.sh TARGET...: the README's two commands (./make.sh demo, ./make.sh
# test) on a machine that has only Go. A fresh Debian has no make, and a
# minimal one no CA certificates (which the Go module proxy needs) or
# python3 (which the demo runs): this installs those when they are missing
# (apt-get, with sudo when not root), then runs make. `make test` itself
# installs everything else the tests use (.ci/setup). Idempotent and quiet
# when everything is there.
set -euo pipefail
cd "$(dirname "$0")"
export PATH="/usr/local/go/bin:$HOME/go/bin:$PATH"

command -v go >/dev/null 2>&1 || { echo "make.sh: Go is required (https://go.dev/dl, the version on go.mod's go line or newer); none found in PATH" >&2; exit 1; }

need=()
command -v make >/dev/null 2>&1 || need+=(make)
command -v git >/dev/null 2>&1 || need+=(git)
command -v python3 >/dev/null 2>&1 || need+=(python3)
[ -e /etc/ssl/certs/ca-certificates.crt ] || need+=(ca-certificates)
if [ ${#need[@]} -gt 0 ]; then
  command -v apt-get >/dev/null 2>&1 || { echo "make.sh: please install ${need[*]} (no apt-get here to do it)" >&2; exit 1; }
  SUDO=
  [ "$(id -u)" -eq 0 ] || SUDO=sudo
  echo "== apt-get install ${need[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
exec make "$@"
