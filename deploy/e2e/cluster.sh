#!/bin/bash
# A two-node upstream Kubernetes on this machine, without Docker or a
# registry (docs/kubernetes.md, "The live cluster"): the control plane on a
# host bridge, each node a network namespace with its own containerd,
# kubelet and kube-proxy. Follows the traps and fixes of
# ../../../shared/notes/k8s-lab.md (cgroup v1, oom_score_adj, sysctls the
# kubelet rewrites, mounts that outlive the cluster).
#
#   deploy/e2e/cluster.sh up      # start (binaries from build.sh)
#   deploy/e2e/cluster.sh down    # stop and clean up everything it made
#   deploy/e2e/cluster.sh cut N   # cut node N's link (node loss)
#
# Needs root, Debian's etcd-server containerd runc containernetworking-plugins
# iptables conntrack, and the binaries build.sh makes.
set -euo pipefail
. "$(dirname "$0")/env.sh"

NODES="1 2"
SYSCTLS="kernel.panic kernel.panic_on_oops vm.overcommit_memory vm.panic_on_oom kernel.keys.root_maxkeys kernel.keys.root_maxbytes"
log() { echo "$(date -u +%T) $*" >&2; }

pki() {
	mkdir -p "$D/pki" && cd "$D/pki"
	[ -f admin.crt ] && return
	openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 7 -subj /CN=rlm-e2e-ca 2>/dev/null
	openssl genrsa -out sa.key 2048 2>/dev/null && openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
	cert() { # name subject [san]
		openssl req -newkey rsa:2048 -nodes -keyout "$1.key" -out "$1.csr" -subj "$2" 2>/dev/null
		local ext=/dev/null
		if [ -n "${3:-}" ]; then ext=$1.ext; printf 'subjectAltName=%s\n' "$3" >"$ext"; fi
		openssl x509 -req -in "$1.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -out "$1.crt" -days 7 -extfile "$ext" 2>/dev/null
	}
	cert apiserver /CN=kube-apiserver "IP:$HOSTIP,IP:$SVCAPI,IP:127.0.0.1,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc"
	cert admin "/O=system:masters/CN=rlm-e2e-admin"
	cd - >/dev/null
}

kubeconfig() {
	cat >"$KUBECONFIG" <<EOF
apiVersion: v1
kind: Config
clusters: [{name: e2e, cluster: {server: "https://$HOSTIP:6443", certificate-authority: $D/pki/ca.crt}}]
users: [{name: admin, user: {client-certificate: $D/pki/admin.crt, client-key: $D/pki/admin.key}}]
contexts: [{name: e2e, context: {cluster: e2e, user: admin}}]
current-context: e2e
EOF
}

network() {
	ip link add $BR type bridge
	ip addr add $HOSTIP/24 dev $BR
	ip link set $BR up
	for n in $NODES; do
		ip netns add rlmn$n
		ip link add veth-rlmn$n type veth peer name eth0 netns rlmn$n
		ip link set veth-rlmn$n master $BR up
		ip -n rlmn$n addr add 10.200.0.1$n/24 dev eth0
		ip -n rlmn$n link set eth0 up
		ip -n rlmn$n link set lo up
		ip netns exec rlmn$n sysctl -qw net.ipv4.ip_forward=1
		ip route add 10.201.$n.0/24 via 10.200.0.1$n
		# The service range needs a route (any next hop): routing comes
		# before kube-proxy's DNAT in OUTPUT.
		ip -n rlmn$n route add $SVCCIDR via $HOSTIP
		for m in $NODES; do
			[ $m = $n ] || ip -n rlmn$n route add 10.201.$m.0/24 via 10.200.0.1$m
		done
	done
	# Nothing from the cluster leaves the machine.
	ip route add unreachable $SVCCIDR 2>/dev/null || true
	iptables -I FORWARD -i $BR ! -o $BR -j DROP
}

control_plane() {
	mkdir -p "$D/etcd" "$D/logs"
	etcd --name e2e --data-dir "$D/etcd" --listen-client-urls http://127.0.0.1:$ETCDPORT \
		--advertise-client-urls http://127.0.0.1:$ETCDPORT --listen-peer-urls http://127.0.0.1:$((ETCDPORT + 1)) \
		--initial-advertise-peer-urls http://127.0.0.1:$((ETCDPORT + 1)) --initial-cluster e2e=http://127.0.0.1:$((ETCDPORT + 1)) \
		>"$D/logs/etcd.log" 2>&1 &
	echo $! >"$D/etcd.pid"
	"$K8SBIN/kube-apiserver" --etcd-servers=http://127.0.0.1:$ETCDPORT --bind-address=$HOSTIP --advertise-address=$HOSTIP \
		--secure-port=6443 --service-cluster-ip-range=$SVCCIDR --tls-cert-file="$D/pki/apiserver.crt" \
		--tls-private-key-file="$D/pki/apiserver.key" --client-ca-file="$D/pki/ca.crt" \
		--service-account-key-file="$D/pki/sa.pub" --service-account-signing-key-file="$D/pki/sa.key" \
		--service-account-issuer=https://kubernetes.default.svc --authorization-mode=Node,RBAC --allow-privileged=true \
		--kubelet-preferred-address-types=InternalIP --kubelet-client-certificate="$D/pki/admin.crt" \
		--kubelet-client-key="$D/pki/admin.key" >"$D/logs/apiserver.log" 2>&1 &
	echo $! >"$D/apiserver.pid"
	until kubectl get --raw /readyz >/dev/null 2>&1; do sleep 0.5; done
	"$K8SBIN/kube-controller-manager" --kubeconfig="$KUBECONFIG" --authentication-kubeconfig="$KUBECONFIG" \
		--authorization-kubeconfig="$KUBECONFIG" --service-account-private-key-file="$D/pki/sa.key" \
		--root-ca-file="$D/pki/ca.crt" --leader-elect=false --bind-address=127.0.0.1 --secure-port=10457 \
		--use-service-account-credentials=false >"$D/logs/controller-manager.log" 2>&1 &
	echo $! >"$D/controller-manager.pid"
	"$K8SBIN/kube-scheduler" --kubeconfig="$KUBECONFIG" --authentication-kubeconfig="$KUBECONFIG" \
		--authorization-kubeconfig="$KUBECONFIG" --leader-elect=false --bind-address=127.0.0.1 --secure-port=10459 \
		>"$D/logs/scheduler.log" 2>&1 &
	echo $! >"$D/scheduler.pid"
}

cgroups() { # node: cgroupRoot /rlmnN in every hierarchy, cpusets filled
	for h in /sys/fs/cgroup/*/; do
		case $h in */unified/ | */systemd/) continue ;; esac
		mkdir -p "$h/rlmn$1"
		if [ -f "$h/cpuset.cpus" ]; then
			cat "$h/cpuset.cpus" >"$h/rlmn$1/cpuset.cpus"
			cat "$h/cpuset.mems" >"$h/rlmn$1/cpuset.mems"
		fi
	done
	mkdir -p /sys/fs/cgroup/systemd/rlmn$1 2>/dev/null || true
}

node() {
	local n=$1 nd=$D/n$1
	mkdir -p "$nd/containerd" "$nd/cni" "$nd/kubelet/seccomp/profiles" "$nd/opt"
	cp "$SRC/deploy/kustomize/base/rlm-bwrap.seccomp.json" "$nd/kubelet/seccomp/profiles/"
	cat >"$nd/containerd.toml" <<EOF
version = 2
root = "$nd/containerd/root"
state = "$nd/containerd/state"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper"]
[grpc]
  address = "$nd/containerd.sock"
[ttrpc]
  address = "$nd/containerd.sock.ttrpc"
[plugins."io.containerd.internal.v1.opt"]
  path = "$nd/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "registry.k8s.io/pause:3.10"
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$nd/cni"
  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
    runtime_type = "io.containerd.runc.v2"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
      SystemdCgroup = false
EOF
	cat >"$nd/cni/10-rlm.conflist" <<EOF
{"cniVersion": "0.4.0", "name": "rlm-e2e", "plugins": [
  {"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": false, "hairpinMode": true,
   "ipam": {"type": "host-local", "dataDir": "$nd/ipam", "ranges": [[{"subnet": "10.201.$n.0/24"}]], "routes": [{"dst": "0.0.0.0/0"}]}},
  {"type": "portmap", "capabilities": {"portMappings": true}}]}
EOF
	cat >"$nd/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
authentication: {anonymous: {enabled: false}, webhook: {enabled: true}, x509: {clientCAFile: "$D/pki/ca.crt"}}
authorization: {mode: AlwaysAllow}
cgroupDriver: cgroupfs
cgroupRoot: /rlmn$n
failCgroupV1: false
failSwapOn: false
containerRuntimeEndpoint: unix://$nd/containerd.sock
readOnlyPort: 0
resolvConf: ""
evictionHard: {memory.available: 100Mi, nodefs.available: "1%", imagefs.available: "1%", nodefs.inodesFree: "1%"}
imageGCHighThresholdPercent: 100
EOF
	cat >"$nd/kube-proxy.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: "$KUBECONFIG"}
mode: iptables
hostnameOverride: n$n
clusterCIDR: 10.201.0.0/16
metricsBindAddress: 127.0.0.1:10249
conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
EOF
	cgroups $n
	# nsenter --net, not ip netns exec: the latter remounts /sys, and runc
	# then finds no cgroup mount.
	nsenter --net=/run/netns/rlmn$n containerd --config "$nd/containerd.toml" >"$D/logs/containerd-n$n.log" 2>&1 &
	echo $! >"$D/containerd-n$n.pid"
}

kubelet_start() {
	local n=$1 nd=$D/n$1
	nsenter --net=/run/netns/rlmn$n "$K8SBIN/kubelet" --config "$nd/kubelet.yaml" --kubeconfig "$KUBECONFIG" \
		--root-dir "$nd/kubelet" --cert-dir "$nd/kubelet/pki" --hostname-override n$n --node-ip 10.200.0.1$n \
		>"$D/logs/kubelet-n$n.log" 2>&1 &
	echo $! >"$D/kubelet-n$n.pid"
	nsenter --net=/run/netns/rlmn$n "$K8SBIN/kube-proxy" --config "$nd/kube-proxy.yaml" >"$D/logs/kube-proxy-n$n.log" 2>&1 &
	echo $! >"$D/kube-proxy-n$n.pid"
}

import_images() {
	for n in $NODES; do
		until [ -S "$D/n$n/containerd.sock" ]; do sleep 0.2; done
		for img in "$D"/images/*.tar; do
			ctr -a "$D/n$n/containerd.sock" -n k8s.io images import --all-platforms "$img" >/dev/null
		done
	done
}

up() {
	[ -e "$D/up" ] && { echo "already up (deploy/e2e/cluster.sh down first)" >&2; exit 1; }
	mkdir -p "$D/logs"
	local t0=$SECONDS
	for s in $SYSCTLS; do echo "$s=$(sysctl -n $s)"; done >"$D/sysctls.saved"
	touch "$D/up"
	# A new cluster every time: no etcd data or node state from the last.
	rm -rf "$D/etcd" "$D"/n[0-9]*
	pki && kubeconfig && network && control_plane
	for n in $NODES; do node $n; done
	import_images
	for n in $NODES; do kubelet_start $n; done
	for n in $NODES; do
		until kubectl get node n$n >/dev/null 2>&1; do sleep 0.5; done
	done
	kubectl wait --for=condition=Ready node --all --timeout=300s >&2
	# The kubelet rewrote host-wide sysctls at start; it does not again.
	sysctl -q -p "$D/sysctls.saved"
	log "cluster up in $((SECONDS - t0)) s"
}

# stop_pid PID: TERM, up to 30 s to exit, then KILL.
stop_pid() {
	kill "$1" 2>/dev/null || return 0
	for _ in $(seq 60); do kill -0 "$1" 2>/dev/null || return 0; sleep 0.5; done
	kill -9 "$1" 2>/dev/null || true
}

down() {
	[ -e "$D/up" ] || return 0
	local t0=$SECONDS
	kubectl delete ns rlm-e2e --wait=true --timeout=120s >/dev/null 2>&1 || true
	kubectl delete pods --all -A --wait=true --timeout=60s >/dev/null 2>&1 || true
	for p in kubelet-n1 kubelet-n2 kube-proxy-n1 kube-proxy-n2; do [ -f "$D/$p.pid" ] && kill "$(cat "$D/$p.pid")" 2>/dev/null || true; done
	sleep 1
	for n in $NODES; do
		if [ -S "$D/n$n/containerd.sock" ]; then
			for t in $(ctr -a "$D/n$n/containerd.sock" -n k8s.io tasks ls -q 2>/dev/null); do
				ctr -a "$D/n$n/containerd.sock" -n k8s.io tasks kill -s KILL "$t" 2>/dev/null || true
			done
		fi
		[ -f "$D/containerd-n$n.pid" ] && kill "$(cat "$D/containerd-n$n.pid")" 2>/dev/null || true
	done
	sleep 1
	# Shims and whatever is left in the nodes' cgroups.
	for n in $NODES; do
		for f in /sys/fs/cgroup/pids/rlmn$n /sys/fs/cgroup/memory/rlmn$n; do
			[ -d $f ] && find $f -name cgroup.procs -exec cat {} + 2>/dev/null | xargs -r kill -9 2>/dev/null || true
		done
		# Shims, by the pid each wrote in its task's state directory.
		find "$D/n$n/containerd/state" -name shim.pid -exec cat {} + 2>/dev/null | xargs -r kill -9 2>/dev/null || true
	done
	for p in as-router as-controller scheduler controller-manager apiserver etcd; do [ -f "$D/$p.pid" ] && stop_pid "$(cat "$D/$p.pid")"; done
	# Mounts under the cluster's directory, deepest first.
	grep -o " $D/[^ ]*" /proc/self/mounts | sort -r | while read -r m; do umount -l "$m" 2>/dev/null || true; done
	for n in $NODES; do ip netns del rlmn$n 2>/dev/null || true; ip route del 10.201.$n.0/24 2>/dev/null || true; done
	ip link del $BR 2>/dev/null || true
	ip route del unreachable $SVCCIDR 2>/dev/null || true
	iptables -D FORWARD -i $BR ! -o $BR -j DROP 2>/dev/null || true
	for n in $NODES; do
		for h in /sys/fs/cgroup/*/rlmn$n; do
			[ -d "$h" ] && find "$h" -depth -type d -exec rmdir {} \; 2>/dev/null || true
		done
	done
	[ -f "$D/sysctls.saved" ] && sysctl -q -p "$D/sysctls.saved"
	rm -f "$D/up" "$D"/*.pid
	log "cluster down in $((SECONDS - t0)) s"
}

cut() { # node loss: the node's link goes down, its processes stay
	ip link set veth-rlmn$1 down
}

case "${1:-}" in
up) up ;;
down) down ;;
cut) cut "$2" ;;
*) echo "usage: $0 up|down|cut N" >&2; exit 2 ;;
esac
