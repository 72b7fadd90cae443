#!/usr/bin/env bash
# End-to-end suite on kind, for users with Docker and internet (`make e2e-kind`). It never ran in this
# project's CI, which has no Docker: see the README.
#
# It builds hyperbatch's image and the e2e worker image, creates a kind cluster whose two workers carry
# hyperbatch.dev/e2e-node=real, installs the neighbours at the versions the project pins, hyperbatch's
# chart and a HyperNode tree, then runs test/e2e against it with HYPERBATCH_E2E_NODES=real: the same
# suite that runs on kwok and on hack/localcluster's real nodes. KEEP=1 keeps the cluster.
#
# The neighbours, each installed the way its project documents, from the pinned version:
#   - Volcano's controller-manager and webhook-manager: Volcano's Helm chart from the pinned module
#     (volcano.sh/volcano in hack/tools/volcano/go.mod), without its scheduler (the suite starts
#     vc-scheduler itself, as on the local cluster) and without its CRDs (hack/crds.sh generates them
#     from volcano.sh/apis; the chart's copies at v1.14.0-alpha.0 lack HyperNode tierName and PodGroup
#     highestTierName). Images: docker.io/volcanosh/*:$VOLCANO_IMAGE_TAG (default: the pinned version).
#   - JobSet: its release manifests for the version go.mod pins.
#   - Kubeflow Trainer: its manager overlay from the pinned module (hack/tools/trainer/go.mod), without
#     the JobSet it bundles (JobSet is installed above).
# The node image is kindest/node:<the Kubernetes release of go.mod's k8s.io/api> (KIND_NODE_IMAGE
# overrides it; kind builds it when it cannot be pulled).
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
hack/tools.sh kubectl helm controller-gen vc-scheduler
hack/crds.sh
kubectl=bin/kubectl
helm=bin/helm

pin() { # module path, go.mod file -> the version that file requires
  awk -v m="$1" '$1==m {print $2; exit} $1=="require" && $2==m {print $3; exit}' "$2"
}
moddir() { go mod download -json "$1" | awk -F'"' '/"Dir":/{print $4}'; }
VOLCANO=$(pin volcano.sh/volcano hack/tools/volcano/go.mod)
JOBSET=$(pin sigs.k8s.io/jobset go.mod)
TRAINER=$(pin github.com/kubeflow/trainer/v2 hack/tools/trainer/go.mod)
for v in VOLCANO JOBSET TRAINER; do
  [ -n "${!v}" ] || { echo "test/kind: could not read the pinned $v version from its go.mod" >&2; exit 1; }
done
VOLCANO_IMAGE_TAG=${VOLCANO_IMAGE_TAG:-$VOLCANO}
# The cluster runs the Kubernetes release hyperbatch is built on (go.mod's k8s.io/api v0.X.Y is
# v1.X.Y; docs/compatibility.md: 1.36 and 1.37 only). kind builds the node image from that release
# when no such image can be pulled.
K8S=v1.$(pin k8s.io/api go.mod | cut -c4-)
KIND_NODE_IMAGE=${KIND_NODE_IMAGE:-kindest/node:$K8S}
VOLCANO_CHART=$(moddir "volcano.sh/volcano@$VOLCANO")/installer/helm/chart/volcano
TRAINER_MANIFESTS=$(moddir "github.com/kubeflow/trainer/v2@$TRAINER")/manifests

cleanup() { [ "${KEEP:-}" = 1 ] || kind delete cluster --name "$CLUSTER" >/dev/null 2>&1 || true; }
trap cleanup EXIT

docker build -t "$IMAGE" .
make --no-print-directory images # _output/images/worker.tar: the e2e workload image (OCI archive)
docker image inspect "$KIND_NODE_IMAGE" >/dev/null 2>&1 || docker pull "$KIND_NODE_IMAGE" ||
  kind build node-image --image "$KIND_NODE_IMAGE" "$K8S"
kind create cluster --config test/kind/kind-config.yaml --image "$KIND_NODE_IMAGE" --kubeconfig "$KUBECONFIG_FILE" --wait 120s
kind load docker-image "$IMAGE" --name "$CLUSTER"
kind load image-archive _output/images/worker.tar --name "$CLUSTER"
export KUBECONFIG=$KUBECONFIG_FILE

for d in _output/crds/*/; do $kubectl apply --server-side -f "$d" >/dev/null; done
$kubectl wait --for=condition=Established crd --all --timeout=120s

echo "test/kind: Volcano $VOLCANO (images $VOLCANO_IMAGE_TAG), controllers and webhooks"
$helm template volcano "$VOLCANO_CHART" --namespace volcano-system \
  --set basic.image_tag_version="$VOLCANO_IMAGE_TAG" --set custom.scheduler_enable=false \
  --show-only templates/controllers.yaml --show-only templates/admission-init.yaml \
  --show-only templates/admission.yaml --show-only templates/webhooks.yaml >_output/kind/volcano.yaml
$kubectl create namespace volcano-system --dry-run=client -o yaml | $kubectl apply -f - >/dev/null
$kubectl apply --server-side -f _output/kind/volcano.yaml >/dev/null
$kubectl -n volcano-system rollout status deploy/volcano-controllers deploy/volcano-admission --timeout=5m

echo "test/kind: JobSet $JOBSET"
$kubectl apply --server-side -f "https://github.com/kubernetes-sigs/jobset/releases/download/$JOBSET/manifests.yaml" >/dev/null
$kubectl -n jobset-system rollout status deploy/jobset-controller-manager --timeout=5m

echo "test/kind: Kubeflow Trainer $TRAINER"
rm -rf _output/kind/trainer && cp -r "$TRAINER_MANIFESTS" _output/kind/trainer && chmod -R u+w _output/kind/trainer
sed -i '/third-party\/jobset/d' _output/kind/trainer/overlays/manager/kustomization.yaml
$kubectl apply --server-side -k _output/kind/trainer/overlays/manager >/dev/null
$kubectl -n kubeflow-system rollout status deploy/kubeflow-trainer-controller-manager --timeout=5m

$helm upgrade --install hyperbatch charts/hyperbatch --namespace hyperbatch-system --create-namespace \
  --set image.repository=hyperbatch --set image.tag=e2e --set image.pullPolicy=Never --wait --timeout 5m
$kubectl apply -f test/kind/hypernodes.yaml
HYPERBATCH_E2E_KUBECONFIG=$PWD/$KUBECONFIG_FILE HYPERBATCH_E2E_NODES=real \
  go test -count=1 -tags e2e -v ./test/e2e/...
