#!/bin/bash
# Builds what the e2e cluster runs, from the Go module proxy (cached: a
# rebuild takes seconds): Kubernetes v1.35.4 (kube-apiserver,
# kube-controller-manager, kube-scheduler, kubelet, kube-proxy, kubectl)
# into $K8SBIN and agent-sandbox v0.5.6 (controller, router, CRDs) into
# $ASBIN. `go install k8s.io/kubernetes/cmd/...@v1.35.4` cannot work: the
# module replaces its 31 staging modules with ./staging paths, so a scratch
# module requires it and repeats each replace with the published v0.35.4.
set -euo pipefail
. "$(dirname "$0")/env.sh"
K8S=v1.35.4 STAGING=v0.35.4 AS=v0.5.6
export CGO_ENABLED=0
W=$(dirname "$K8SBIN")
mkdir -p "$W" && cd "$W"
if [ ! -f go.mod ]; then
	curl -fsS "https://proxy.golang.org/k8s.io/kubernetes/@v/$K8S.mod" -o upstream.mod
	{
		echo "module k8sbuild"; echo
		grep -E '^go ' upstream.mod; echo
		grep -E '^godebug ' upstream.mod || true; echo
		echo "require k8s.io/kubernetes $K8S"; echo
		echo "replace ("
		grep '=> ./staging' upstream.mod | awk -v v=$STAGING '{print "\t" $1 " => " $1 " " v}'
		echo ")"
	} >go.mod
	printf '//go:build tools\n\npackage tools\n\nimport (\n' >tools.go
	for c in kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl; do
		printf '\t_ "k8s.io/kubernetes/cmd/%s"\n' $c >>tools.go
	done
	echo ')' >>tools.go
	go mod tidy
fi
LD="-X k8s.io/component-base/version.gitVersion=$K8S -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=35"
mkdir -p "$K8SBIN"
for c in kubelet kube-proxy kube-scheduler kube-controller-manager kubectl kube-apiserver; do
	go build -ldflags "$LD" -o "$K8SBIN/$c" k8s.io/kubernetes/cmd/$c
done
# The proxy answers 403 for agent-sandbox's version list, so no
# `go install ...@v0.5.6`: a scratch module requires the exact version.
mkdir -p "$ASBIN/bin" "$ASBIN/crds" && cd "$ASBIN"
if [ ! -f go.mod ]; then
	printf 'module asbuild\n\ngo 1.26.0\n\nrequire sigs.k8s.io/agent-sandbox %s\n' $AS >go.mod
	printf '//go:build tools\n\npackage tools\n\nimport (\n\t_ "sigs.k8s.io/agent-sandbox/cmd/agent-sandbox-controller"\n\t_ "sigs.k8s.io/agent-sandbox/sandbox-router/cmd"\n)\n' >tools.go
	GOFLAGS=-mod=mod go mod tidy
fi
GOFLAGS=-mod=mod go build -o bin/sandbox-router sigs.k8s.io/agent-sandbox/sandbox-router/cmd
GOFLAGS=-mod=mod go build -o bin/agent-sandbox-controller sigs.k8s.io/agent-sandbox/cmd/agent-sandbox-controller
cp "$(GOFLAGS=-mod=mod go list -m -f '{{.Dir}}' sigs.k8s.io/agent-sandbox)"/k8s/crds/*.yaml crds/
