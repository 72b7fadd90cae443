#!/usr/bin/env bash
# Gathers the CustomResourceDefinitions of the projects hyperbatch works with from the Go module cache
# into _output/crds/ (git-ignored) — nothing upstream is copied into the repository:
#   volcano/   Volcano's CRDs generated with controller-gen from the Go types we compile against
#              (volcano.sh/apis): scheduling (PodGroup, Queue), topology (HyperNode), batch (Job,
#              CronJob), bus (Command), nodeinfo (Numatopology) and flow (JobFlow, JobTemplate, which
#              Volcano's controller-manager watches). volcano.sh/volcano's own config/crd YAML is not
#              used: at v1.14.0-alpha.0 it lacks HyperNode spec.tierName and PodGroup
#              networkTopology.highestTierName and defaults highestTierAllowed to 1, so the apiserver
#              would reject or drop fields the types (and our scheduler) have.
#   karmada/   github.com/karmada-io/karmada charts/karmada/_crds/bases/{policy,work}
#   jobset/    sigs.k8s.io/jobset config/components/crd/bases
#   training/  the HyperJob CRD, which Volcano does not publish: generated with controller-gen from
#              volcano.sh/apis pkg/apis/training/v1alpha1
#   trainer/   Kubeflow Trainer's CRDs (github.com/kubeflow/trainer/v2 manifests/base/crds: TrainJob,
#              TrainingRuntime, ClusterTrainingRuntime) and the scheduler-plugins PodGroup of its coscheduling
#              plugin (sigs.k8s.io/scheduler-plugins config/crd/bases), the versions
#              hack/tools/trainer/go.mod pins; the TrainJob integration tests and the local cluster
#              (hack/localcluster applies everything below _output/crds/) install them
#
# `hack/crds.sh kueue` (make bench-tools; never make test) gathers, for the peers benchmark only, into
# _output/kueue/ (git-ignored): Kueue's CRDs (sigs.k8s.io/kueue config/components/crd/bases), its
# webhook configurations (config/components/webhook/manifests.yaml) and its documented manager
# configuration (config/components/manager/controller_manager_config.yaml), of the version
# hack/tools/kueue/go.mod pins.
# Re-running is cheap: the output is rebuilt only when the pinned versions change.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${CRDS_DIR:-_output/crds}
BIN=${HYPERBATCH_BIN:-$PWD/bin}

die() { echo "hack/crds.sh: $*" >&2; exit 1; }

VOLCANO_APIS=volcano.sh/apis@v1.14.0
KUEUE=sigs.k8s.io/kueue@v0.19.2
KARMADA=github.com/karmada-io/karmada@v1.16.0
JOBSET=sigs.k8s.io/jobset@v0.11.0
TRAINER=github.com/kubeflow/trainer/v2@v2.3.0
SCHED_PLUGINS=sigs.k8s.io/scheduler-plugins@v0.35.4-devel
# The versions the trainer tool module pins must be the ones whose CRDs are installed.
for pin in "$TRAINER" "$SCHED_PLUGINS"; do
  grep -q "^[[:space:]]*${pin%@*} ${pin#*@}\b" hack/tools/trainer/go.mod || die "hack/tools/trainer/go.mod does not pin $pin; update hack/crds.sh."
done
# The version of volcano.sh/apis the product's go.mod pins must be the one the CRDs are generated from.
gomod_apis="volcano.sh/apis@$(awk '$1=="volcano.sh/apis"{print $2; exit}' go.mod)"
[ "$gomod_apis" = "$VOLCANO_APIS" ] || die "go.mod pins $gomod_apis but hack/crds.sh generates from $VOLCANO_APIS; update VOLCANO_APIS."
moddir() { # module@version -> its directory in the module cache (downloads it if needed)
  local dir
  dir=$(go mod download -json "$1" 2>/dev/null | awk -F'"' '/"Dir":/{print $4}')
  [ -n "$dir" ] && [ -d "$dir" ] || die "could not download $1 from the Go module proxy ($(go env GOPROXY)). Check the proxy settings (GOPROXY, GOFLAGS=-mod=mod) and retry."
  echo "$dir"
}

if [ "${1:-}" = kueue ]; then
  grep -q "^[[:space:]]*${KUEUE%@*} ${KUEUE#*@}\b" hack/tools/kueue/go.mod || die "hack/tools/kueue/go.mod does not pin $KUEUE; update hack/crds.sh."
  kout=${KUEUE_DIR:-_output/kueue}
  kstamp="$KUEUE $(sha256sum hack/crds.sh | cut -c1-16)"
  if [ -f "$kout/.stamp" ] && [ "$(cat "$kout/.stamp")" = "$kstamp" ]; then
    echo "Kueue's CRDs and manifests up to date in $kout"
    exit 0
  fi
  ku=$(moddir "$KUEUE")
  rm -rf "$kout"
  mkdir -p "$kout/crds"
  for f in "$ku"/config/components/crd/bases/*.yaml; do
    grep -q '^kind: CustomResourceDefinition' "$f" && install -m 0644 "$f" "$kout/crds/"
  done
  for want in topologies resourceflavors clusterqueues localqueues workloads; do
    [ -f "$kout/crds/kueue.x-k8s.io_$want.yaml" ] || die "$KUEUE has no config/components/crd/bases/kueue.x-k8s.io_$want.yaml; did it move?"
  done
  install -m 0644 "$ku/config/components/webhook/manifests.yaml" "$kout/webhooks.yaml" \
    || die "$KUEUE has no config/components/webhook/manifests.yaml"
  install -m 0644 "$ku/config/components/manager/controller_manager_config.yaml" "$kout/controller_manager_config.yaml" \
    || die "$KUEUE has no config/components/manager/controller_manager_config.yaml"
  echo "$kstamp" > "$kout/.stamp"
  echo "Kueue's CRDs, webhook configurations and manager configuration written to $kout"
  exit 0
fi

stamp="$VOLCANO_APIS $KARMADA $JOBSET $TRAINER $SCHED_PLUGINS $(sha256sum hack/crds.sh | cut -c1-16)"

if [ -f "$OUT/.stamp" ] && [ "$(cat "$OUT/.stamp")" = "$stamp" ]; then
  echo "upstream CRDs up to date in $OUT"
  exit 0
fi


copy_yaml() { # src-dir dst-dir
  [ -d "$1" ] || die "expected CRD directory $1 is missing from the module; the pinned version may have moved it."
  mkdir -p "$2"
  local n=0 f
  for f in "$1"/*.yaml; do
    [ -e "$f" ] || continue
    grep -q '^kind: CustomResourceDefinition' "$f" || continue
    install -m 0644 "$f" "$2/"
    n=$((n + 1))
  done
  [ "$n" -gt 0 ] || die "no CRD YAML found in $1"
}

rm -rf "$OUT"
mkdir -p "$OUT"
k=$(moddir $KARMADA); j=$(moddir $JOBSET); moddir $VOLCANO_APIS >/dev/null

copy_yaml "$k/charts/karmada/_crds/bases/policy" "$OUT/karmada"
copy_yaml "$k/charts/karmada/_crds/bases/work" "$OUT/karmada"
copy_yaml "$j/config/components/crd/bases" "$OUT/jobset"
tr=$(moddir $TRAINER); sp=$(moddir $SCHED_PLUGINS)
copy_yaml "$tr/manifests/base/crds" "$OUT/trainer"
install -m 0644 "$sp/config/crd/bases/scheduling.x-k8s.io_podgroups.yaml" "$OUT/trainer/" \
  || die "$SCHED_PLUGINS has no config/crd/bases/scheduling.x-k8s.io_podgroups.yaml"

[ -x "$BIN/controller-gen" ] || hack/tools.sh controller-gen

gen() { # dir options package... : controller-gen's CRDs for the packages into $OUT/dir
  local dir=$1 opts=$2 paths="" pkg
  shift 2
  for pkg in "$@"; do paths="$paths${paths:+;}volcano.sh/apis/pkg/apis/$pkg"; done
  mkdir -p "$OUT/$dir"
  "$BIN/controller-gen" "$opts" paths="$paths" output:crd:dir="$OUT/$dir" \
    || die "controller-gen could not generate CRDs for $* from $VOLCANO_APIS (output above)."
}
# Volcano's own options (its Makefile): crdVersions=v1 and generateEmbeddedObjectMeta, so embedded pod
# templates keep their labels/annotations. maxDescLen=0 for the kinds that embed pod templates (Job,
# CronJob, JobTemplate, JobFlow): with descriptions those CRDs exceed what the apiserver (and
# kubectl apply's last-applied annotation) accepts, as upstream also strips them.
gen volcano crd:crdVersions=v1,generateEmbeddedObjectMeta=true scheduling/v1beta1 topology/v1alpha1 bus/v1alpha1 nodeinfo/v1alpha1
gen volcano crd:crdVersions=v1,generateEmbeddedObjectMeta=true,maxDescLen=0 batch/v1alpha1 flow/v1alpha1
for want in scheduling.volcano.sh_podgroups scheduling.volcano.sh_queues topology.volcano.sh_hypernodes \
  batch.volcano.sh_jobs batch.volcano.sh_cronjobs bus.volcano.sh_commands nodeinfo.volcano.sh_numatopologies \
  flow.volcano.sh_jobflows flow.volcano.sh_jobtemplates; do
  [ -f "$OUT/volcano/$want.yaml" ] || die "controller-gen wrote no $want.yaml into $OUT/volcano; did $VOLCANO_APIS rename a kind?"
done

# The HyperJob (Volcano publishes no CRD for it): maxDescLen=0 because it embeds whole Volcano Job
# specs (pod templates), and generateEmbeddedObjectMeta so the apiserver keeps those templates'
# labels and annotations (without it they were pruned).
gen training crd:crdVersions=v1,generateEmbeddedObjectMeta=true,maxDescLen=0 training/v1alpha1
[ -f "$OUT/training/training.volcano.sh_hyperjobs.yaml" ] || die "controller-gen wrote no HyperJob CRD into $OUT/training"

echo "$stamp" > "$OUT/.stamp"
echo "upstream CRDs written to $OUT: $(find "$OUT" -name '*.yaml' | wc -l) files"
