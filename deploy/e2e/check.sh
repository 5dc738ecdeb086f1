#!/bin/bash
# The live-cluster checks of docs/kubernetes.md, on the cluster cluster.sh
# made, with the images image.sh made. Each prints its figure after the
# command that produced it; everything also goes to $D/results.txt.
#   deploy/e2e/check.sh [all|deploy|health|session|drain|rollout|nodeloss|agent-sandbox]...
set -euo pipefail
. "$(dirname "$0")/env.sh"
NS=rlm-e2e
TOKEN=e2e-token
LG=$D/build/loadgen
OUT=$D/results.txt
say() { echo "$*" | tee -a "$OUT"; }
run() { say "\$ $*"; "$@" 2>&1 | tee -a "$OUT"; }
in_n1() { nsenter --net=/run/netns/rlmn1 "$@"; }
svc() { echo "http://$(kubectl -n $NS get svc rlm-serve -o jsonpath='{.spec.clusterIP}')"; }

deploy() {
	( cd "$SRC" && CGO_ENABLED=0 go build -o "$LG" ./deploy/e2e/loadgen )
	kubectl get ns $NS >/dev/null 2>&1 || kubectl create ns $NS
	kubectl -n $NS get secret rlm-serve >/dev/null 2>&1 || kubectl -n $NS create secret generic rlm-serve --from-literal=token=$TOKEN
	# containerd 1.6 has no user-namespaced pods: the privileged overlay.
	kubectl apply -n $NS -k "$SRC/deploy/kustomize/overlays/privileged"
	local t0=$(date +%s.%N)
	run kubectl -n $NS rollout status deploy/rlm-serve --timeout=300s
	say "replicas ready after $(echo "$(date +%s.%N) - $t0" | bc) s"
	run kubectl -n $NS get pods -o wide
}

health() {
	say "\$ curl -s \$SVC/health (from node n1)"
	in_n1 curl -s -m 10 "$(svc)/health" | python3 -c 'import json,sys; h=json.load(sys.stdin); print({k: h[k] for k in ("status","isolation","session_isolation","runtime_isolation")})' | tee -a "$OUT"
}

session() {
	run in_n1 "$LG" session -url "$(svc)" -token $TOKEN -cells 20
}

# under_load CMD...: load from node n1 (6 clients, a new connection per
# request) while CMD runs, then 5 s more, then the totals.
under_load() {
	rm -f "$D/stop"
	in_n1 "$LG" load -url "$(svc)" -token $TOKEN -clients 6 -until "$D/stop" >"$D/load.out" 2>&1 &
	local lp=$!
	sleep 5
	run "$@"
	sleep 5
	touch "$D/stop"
	wait $lp || true
	say "load during it: $(cat "$D/load.out")"
}

drain() {
	local node
	node=$(kubectl -n $NS get pods -o jsonpath='{.items[0].spec.nodeName}')
	under_load kubectl drain "$node" --ignore-daemonsets --delete-emptydir-data --timeout=300s
	run kubectl -n $NS rollout status deploy/rlm-serve --timeout=300s
	kubectl uncordon "$node"
}

rollout() {
	under_load sh -c "kubectl -n $NS rollout restart deploy/rlm-serve && kubectl -n $NS rollout status deploy/rlm-serve --timeout=300s"
}

# replica_of ID: the replica a session id names.
replica_of() { python3 -c 'import base64,sys; p=sys.argv[1].split(".")[1]; print(base64.urlsafe_b64decode(p+"="*(-len(p)%4)).split(b"\0")[0].decode())' "$1"; }

# live_pod NODE: a running, not terminating rlm-serve pod on NODE, or "".
live_pod() {
	kubectl -n $NS get pods -l app.kubernetes.io/name=rlm-serve -o json | python3 -c '
import json, sys
for p in json.load(sys.stdin)["items"]:
    if p["spec"].get("nodeName") == sys.argv[1] and p["status"].get("phase") == "Running" and "deletionTimestamp" not in p["metadata"]:
        print(p["metadata"]["name"]); break' "$1"
}

nodeloss() {
	# One replica on each node (a rollout may leave both on one: the spread
	# is ScheduleAnyway so that drains never wait on it).
	local i
	for i in 1 2 3 4 5; do
		[ -n "$(live_pod n2)" ] && [ -n "$(live_pod n1)" ] && break
		local both=n1
		[ -z "$(live_pod n1)" ] && both=n2
		kubectl -n $NS delete pod "$(live_pod $both)" --wait=false >/dev/null
		kubectl -n $NS rollout status deploy/rlm-serve --timeout=300s >/dev/null
		sleep 2
	done
	run kubectl -n $NS get pods -o wide
	# A session on the replica of node n2, to see what its calls answer after.
	local pod sid=""
	pod=$(live_pod n2)
	for _ in $(seq 20); do
		sid=$(in_n1 "$LG" open -url "$(svc)" -token $TOKEN)
		[ "$(replica_of "$sid")" = "$pod" ] && break
	done
	say "session $sid lives on $pod (node n2)"
	say "\$ deploy/e2e/cluster.sh cut 2   # node n2's link goes down"
	"$SRC/deploy/e2e/cluster.sh" cut 2
	local t0=$(date +%s.%N)
	run in_n1 "$LG" recover -url "$(svc)" -token $TOKEN -ok 10 -timeout 5s || true
	say "new sessions work again $(echo "$(date +%s.%N) - $t0" | bc) s after the cut"
	run kubectl get nodes
	run in_n1 "$LG" cell -url "$(svc)" -token $TOKEN -id "$sid"
	ip link set veth-rlmn2 up
	kubectl wait --for=condition=Ready node/n2 --timeout=300s >/dev/null
}

agent_sandbox() {
	local crds=$ASBIN/crds
	kubectl apply --server-side --force-conflicts -f "$crds" >/dev/null
	# The stock CRDs convert versions through the controller's webhook,
	# which runs out of cluster here without one: no conversion (every
	# object here is v1beta1).
	for c in $(kubectl get crd -o name | grep agents.x-k8s.io); do
		kubectl patch "$c" --type=merge -p '{"spec":{"conversion":{"strategy":"None","webhook":null}}}' >/dev/null
	done
	kubectl wait --for=condition=Established crd --all --timeout=60s >/dev/null
	if ! { [ -f "$D/as-controller.pid" ] && kill -0 "$(cat "$D/as-controller.pid")" 2>/dev/null; }; then
		[ -f "$D/as-router.pid" ] && kill "$(cat "$D/as-router.pid")" 2>/dev/null || true
		"$ASBIN/bin/agent-sandbox-controller" --kubeconfig "$KUBECONFIG" --extensions --enable-webhook=false --leader-elect=false \
			--metrics-bind-address 127.0.0.1:18080 --health-probe-bind-address 127.0.0.1:18081 >"$D/logs/as-controller.log" 2>&1 &
		echo $! >"$D/as-controller.pid"
		"$ASBIN/bin/sandbox-router" --kubeconfig "$KUBECONFIG" --cache-enabled --http-bind-address 127.0.0.1:18888 --metrics-bind-address 127.0.0.1:18082 --health-probe-bind-address 127.0.0.1:18083 >"$D/logs/as-router.log" 2>&1 &
		echo $! >"$D/as-router.pid"
	fi
	kubectl apply -n $NS -k "$SRC/deploy/e2e/agent-sandbox"
	kubectl -n $NS wait --for=jsonpath='{.status.readyReplicas}'=2 sandboxwarmpool/rlm --timeout=300s >/dev/null
	run kubectl -n $NS get sandboxwarmpool,sandboxes,pods -l app.kubernetes.io/name=rlm-sandbox
	kubectl -n $NS delete sandboxclaim my-rlm --ignore-not-found --wait=true >/dev/null
	local t0=$(date +%s.%N)
	kubectl -n $NS create -f - <<<'{"apiVersion":"extensions.agents.x-k8s.io/v1beta1","kind":"SandboxClaim","metadata":{"name":"my-rlm"},"spec":{"warmPoolRef":{"name":"rlm"}}}' >/dev/null
	kubectl -n $NS wait --for=condition=Ready sandboxclaim/my-rlm --timeout=120s >/dev/null
	say "claim my-rlm Ready $(echo "$(date +%s.%N) - $t0" | bc) s after it was created"
	local sb
	sb=$(kubectl -n $NS get sandboxclaim my-rlm -o jsonpath='{.status.sandbox.name}')
	run kubectl -n $NS get sandbox "$sb" -o jsonpath='{.metadata.labels.agents\.x-k8s\.io/launch-type}{"\n"}'
	local R=http://127.0.0.1:18888 H=(-H "X-Sandbox-ID: $sb" -H "X-Sandbox-Namespace: $NS" -H "X-Sandbox-Port: 8888")
	say "\$ curl \$ROUTER/sessions ... (X-Sandbox-ID: $sb)"
	local sid
	sid=$(curl -s -m 30 "${H[@]}" -H 'Content-Type: application/json' $R/sessions -d '{}' | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
	for code in 'x = 40' 'x += 2' 'print(x)'; do
		curl -s -m 30 "${H[@]}" -H 'Content-Type: application/json' "$R/sessions/$sid/execute" \
			-d "$(python3 -c 'import json,sys; print(json.dumps({"code": sys.argv[1]}))' "$code")" | tee -a "$OUT"
		echo | tee -a "$OUT"
	done
	run "$LG" command -url $R -h "X-Sandbox-ID: $sb" -h "X-Sandbox-Namespace: $NS" -cmd 'echo "hello from" $(hostname) and uname -r'
	run "$LG" command -url $R -h "X-Sandbox-ID: $sb" -h "X-Sandbox-Namespace: $NS" -cmd 'sh -c "exit 3"'
}

[ $# -gt 0 ] || set -- all
for c in "$@"; do
	case $c in
	all) deploy; health; session; drain; rollout; nodeloss; agent_sandbox ;;
	deploy | health | session | drain | rollout | nodeloss) $c ;;
	agent-sandbox) agent_sandbox ;;
	*) echo "unknown check $c" >&2; exit 2 ;;
	esac
done
