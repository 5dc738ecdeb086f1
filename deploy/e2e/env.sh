# Settings shared by the e2e scripts (sourced). Override with the environment.
SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
D=${RLM_E2E_DIR:-/work/k8se2e}                  # state, logs, images
K8SBIN=${RLM_E2E_K8SBIN:-/work/k8sbuild/bin}    # build.sh's Kubernetes binaries
ASBIN=${RLM_E2E_ASBIN:-/work/asbuild}           # build.sh's agent-sandbox build
export KUBECONFIG=$D/kubeconfig
export PATH=$K8SBIN:$PATH
HOSTIP=10.200.0.1
BR=br-rlme2e
SVCCIDR=10.202.0.0/24
SVCAPI=10.202.0.1
ETCDPORT=23790
