#!/bin/bash
# Builds the e2e images from the checkout, without Docker: the pause image
# and rlm-serve-python (Debian bookworm minbase with python3, bash and
# bubblewrap from mmdebstrap, uid 10001, and rlm with its python and shell
# plugins built here), as archives containerd imports.
#   deploy/e2e/image.sh [TAG]     # default dev
set -euo pipefail
. "$(dirname "$0")/env.sh"
TAG=${1:-dev}
mkdir -p "$D/images" "$D/build"
cd "$SRC"
export CGO_ENABLED=0
go build -trimpath -o "$D/build/pause" ./deploy/e2e/pause
go build -trimpath -ldflags "-s -w -X github.com/rlmkit/rlm/internal/version.Version=e2e-$TAG" -o "$D/build/" \
	./cmd/rlm ./plugins/python/cmd/rlm-plugin-python ./plugins/shell/cmd/rlm-plugin-shell
if [ ! -f "$D/build/rootfs.tar" ]; then
	mmdebstrap --variant=minbase --include=python3,bubblewrap,bash,util-linux,ca-certificates \
		--customize-hook 'chroot "$1" sh -c "groupadd --gid 10001 rlm && useradd --uid 10001 --gid rlm --home-dir /tmp/home --no-create-home rlm"' \
		bookworm "$D/build/rootfs.tar.part" http://deb.debian.org/debian
	mv "$D/build/rootfs.tar.part" "$D/build/rootfs.tar"
fi
: >"$D/build/empty.tar" && tar -cf "$D/build/empty.tar" -T /dev/null
echo '{"Entrypoint": ["/pause"]}' >"$D/build/pause.json"
python3 "$SRC/deploy/e2e/mkimage.py" "$D/images/pause.tar" registry.k8s.io/pause:3.10 "$D/build/pause.json" \
	"$D/build/empty.tar" "$D/build/pause=/pause"
cat >"$D/build/rlm.json" <<JSON
{"Entrypoint": ["rlm", "serve"], "Cmd": ["--addr", "0.0.0.0:8080", "--grace", "20s"], "User": "10001:10001",
 "Env": ["PATH=/usr/local/bin:/usr/bin:/bin", "TMPDIR=/tmp", "XDG_CACHE_HOME=/tmp/cache", "HOME=/tmp/home", "RLM_MODE=python", "RLM_LOG_FORMAT=json"],
 "ExposedPorts": {"8080/tcp": {}}}
JSON
python3 "$SRC/deploy/e2e/mkimage.py" "$D/images/rlm-serve-python-$TAG.tar" docker.io/library/rlm-serve-python:$TAG "$D/build/rlm.json" \
	"$D/build/rootfs.tar" "$D/build/rlm=/usr/local/bin/rlm" "$D/build/rlm-plugin-python=/usr/local/bin/rlm-plugin-python" \
	"$D/build/rlm-plugin-shell=/usr/local/bin/rlm-plugin-shell"
ls -la "$D/images"
