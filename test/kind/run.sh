#!/usr/bin/env bash
# End-to-end suite on kind, for users with Docker and internet (`make e2e-kind`). It builds the image,
# creates a kind cluster, installs the upstream CRDs (from the Go module cache, via hack/crds.sh),
# hyperbatch's chart and a HyperNode tree, then runs test/e2e against it. KEEP=1 keeps the cluster.
set -euo pipefail
cd "$(dirname "$0")/../.."
for tool in docker kind; do
  command -v "$tool" >/dev/null || { echo "test/kind: '$tool' is not installed; this suite needs Docker and kind (use 'make test' without them)" >&2; exit 1; }
done
docker info >/dev/null 2>&1 || { echo "test/kind: no Docker engine is reachable; start Docker and retry" >&2; exit 1; }

IMAGE=hyperbatch:e2e
CLUSTER=hyperbatch-e2e
KUBECONFIG_FILE=_output/kind/kubeconfig
mkdir -p _output/kind
hack/tools.sh kubectl helm controller-gen
hack/crds.sh
kubectl=bin/kubectl

cleanup() { [ "${KEEP:-}" = 1 ] || kind delete cluster --name "$CLUSTER" >/dev/null 2>&1 || true; }
trap cleanup EXIT

docker build -t "$IMAGE" .
kind create cluster --config test/kind/kind-config.yaml --kubeconfig "$KUBECONFIG_FILE" --wait 120s
kind load docker-image "$IMAGE" --name "$CLUSTER"
export KUBECONFIG=$KUBECONFIG_FILE
for d in _output/crds/*/; do $kubectl apply --server-side -f "$d" >/dev/null; done
$kubectl wait --for=condition=Established crd --all --timeout=120s
bin/helm upgrade --install hyperbatch charts/hyperbatch --namespace hyperbatch-system --create-namespace \
  --set image.repository=hyperbatch --set image.tag=e2e --set image.pullPolicy=Never --wait --timeout 5m
$kubectl apply -f test/kind/hypernodes.yaml
HYPERBATCH_E2E_KUBECONFIG=$PWD/$KUBECONFIG_FILE go test -count=1 -tags e2e -v ./test/e2e/...
