#!/usr/bin/env bash
# Builds hyperbatch's development binaries from Go modules into bin/ (git-ignored).
#
#   hack/tools.sh [tool ...]     tools: etcd kube-apiserver kube-controller-manager kubectl kwok
#                                       controller-gen helm golangci-lint vc-controller-manager
#                                       vc-webhook-manager vc-scheduler jobset-controller
#                                       trainer-controller-manager karmada-aggregated-apiserver
#                                       karmada-webhook karmada-controller-manager karmada-scheduler
#                                                                    (default: all)
#                                       kube-apiserver-1.36 kube-controller-manager-1.36
#                                       (the previous minor's control plane, built into bin/k8s-1.36/ under
#                                       the upstream names; not part of the default set)
#                                       kueue-manager (Kueue's manager for the peers benchmark; not part
#                                       of the default set)
#                                       kubelet kube-proxy kube-scheduler containerd
#                                       containerd-shim-runc-v2 ctr cni-bridge cni-host-local cni-loopback (the real nodes of
#                                       hack/localcluster --real-nodes; the CNI plugins go to bin/cni/;
#                                       not part of the default set)
#
# Each tool is pinned by a module under hack/tools/<group>/ (go.mod + go.sum with `tool` directives), so
# the tools' dependencies never reach the product's go.mod. A binary is rebuilt only when it is missing
# or its stamp (the pinned version plus a hash of the group's go.mod/go.sum) no longer matches.
#
# Built binaries are also kept in a per-user cache outside the checkout, keyed by a hash of the stamp
# (like setup-envtest's binary store), so another clone on the same machine copies them instead of
# compiling:  ${HYPERBATCH_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/hyperbatch/tools}/<tool>-<sha>.
# HYPERBATCH_TOOLS_CACHE=off disables it. A machine without the cache builds everything.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BIN=${HYPERBATCH_BIN:-$ROOT/bin}
mkdir -p "$BIN"

die() { echo "hack/tools.sh: $*" >&2; exit 1; }

command -v go >/dev/null 2>&1 || die "no Go toolchain on PATH. Install Go (the version go.mod names)  (https://go.dev/dl) and retry."
# The Go version the product's go.mod asks for is the floor for every tool too.
need=$(awk '$1=="go"{print $2; exit}' go.mod)
gov=$(go env GOVERSION 2>/dev/null | sed 's/^go//')
if [ "$(printf '%s\n%s\n' "$need" "$gov" | sort -V | head -n1)" != "$need" ]; then
  die "Go $gov is too old: go.mod needs Go $need or newer (k8s.io/kubernetes v1.36 and its dependencies). Install Go $need+ from https://go.dev/dl, or set GOTOOLCHAIN=auto, and retry."
fi

# k8s_ldflags version: the version stamps `kube-apiserver --version`, /version and kubectl report (a plain
# `go build` leaves them at v0.0.0, which clients and the skew checks would misread).
k8s_ldflags() {
  local v=$1 minor
  minor=$(echo "$v" | cut -d. -f2)
  echo "-s -w -X k8s.io/component-base/version.gitVersion=$v -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor -X k8s.io/component-base/version.gitTreeState=clean -X k8s.io/client-go/pkg/version.gitVersion=$v"
}
# The control plane make test runs on (group k8s) and the previous minor's (group k8s136), which the
# smaller suite of `make test` runs on; keep each in step with k8s.io/kubernetes in its group's go.mod.
declare -A K8S_VERSION=([k8s]=v1.37.2 [k8s136]=v1.36.3)
# kubelet and kube-proxy (group k8snode) are the control plane's version: build() refuses a go.mod that differs.
K8S_VERSION[k8snode]=${K8S_VERSION[k8s]}

# tool -> "group package ldflags"
declare -A GROUP PKG
GROUP[etcd]=etcd;                    PKG[etcd]=go.etcd.io/etcd/server/v3
GROUP[kube-apiserver]=k8s;           PKG[kube-apiserver]=k8s.io/kubernetes/cmd/kube-apiserver
GROUP[kube-controller-manager]=k8s;  PKG[kube-controller-manager]=k8s.io/kubernetes/cmd/kube-controller-manager
GROUP[kubectl]=k8s;                  PKG[kubectl]=k8s.io/kubernetes/cmd/kubectl
GROUP[kube-apiserver-1.36]=k8s136;          PKG[kube-apiserver-1.36]=k8s.io/kubernetes/cmd/kube-apiserver
GROUP[kube-controller-manager-1.36]=k8s136; PKG[kube-controller-manager-1.36]=k8s.io/kubernetes/cmd/kube-controller-manager
GROUP[kwok]=kwok;                    PKG[kwok]=sigs.k8s.io/kwok/cmd/kwok
GROUP[controller-gen]=gen;           PKG[controller-gen]=sigs.k8s.io/controller-tools/cmd/controller-gen
GROUP[helm]=gen;                     PKG[helm]=helm.sh/helm/v3/cmd/helm
GROUP[golangci-lint]=lint;           PKG[golangci-lint]=github.com/golangci/golangci-lint/v2/cmd/golangci-lint
GROUP[vc-controller-manager]=volcano; PKG[vc-controller-manager]=volcano.sh/volcano/cmd/controller-manager
GROUP[vc-webhook-manager]=volcano;    PKG[vc-webhook-manager]=volcano.sh/volcano/cmd/webhook-manager
GROUP[vc-scheduler]=volcano;          PKG[vc-scheduler]=volcano.sh/volcano/cmd/scheduler
GROUP[jobset-controller]=jobset;      PKG[jobset-controller]=sigs.k8s.io/jobset
GROUP[trainer-controller-manager]=trainer; PKG[trainer-controller-manager]=github.com/kubeflow/trainer/v2/cmd/trainer-controller-manager
GROUP[karmada-aggregated-apiserver]=karmada; PKG[karmada-aggregated-apiserver]=github.com/karmada-io/karmada/cmd/aggregated-apiserver
GROUP[karmada-webhook]=karmada;              PKG[karmada-webhook]=github.com/karmada-io/karmada/cmd/webhook
GROUP[karmada-controller-manager]=karmada;   PKG[karmada-controller-manager]=github.com/karmada-io/karmada/cmd/controller-manager
GROUP[karmada-scheduler]=karmada;            PKG[karmada-scheduler]=github.com/karmada-io/karmada/cmd/scheduler
# Kueue's manager: only the peers benchmark starts it (make bench / make bench-peers build it); it is not in
# ALL, so make test and CI never pay for its build.
GROUP[kueue-manager]=kueue;                  PKG[kueue-manager]=sigs.k8s.io/kueue/cmd/kueue
# The real nodes (hack/localcluster --real-nodes): kubelet and kube-proxy, containerd 2.x with its runc
# shim and ctr, and the CNI plugins. Not in ALL: make test does not start real nodes.
GROUP[kubelet]=k8snode;                      PKG[kubelet]=k8s.io/kubernetes/cmd/kubelet
GROUP[kube-proxy]=k8snode;                   PKG[kube-proxy]=k8s.io/kubernetes/cmd/kube-proxy
# The default scheduler for the real nodes' pods that name no scheduler (the Helm chart's): the
# control plane's group, whose go.mod/go.sum already hold its modules (no other tool's stamp changes).
GROUP[kube-scheduler]=k8s;                   PKG[kube-scheduler]=k8s.io/kubernetes/cmd/kube-scheduler
GROUP[containerd]=containerd;                PKG[containerd]=github.com/containerd/containerd/v2/cmd/containerd
GROUP[containerd-shim-runc-v2]=containerd;   PKG[containerd-shim-runc-v2]=github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2
GROUP[ctr]=containerd;                       PKG[ctr]=github.com/containerd/containerd/v2/cmd/ctr
GROUP[cni-bridge]=cni;                       PKG[cni-bridge]=github.com/containernetworking/plugins/plugins/main/bridge
GROUP[cni-host-local]=cni;                   PKG[cni-host-local]=github.com/containernetworking/plugins/plugins/ipam/host-local
GROUP[cni-loopback]=cni;                     PKG[cni-loopback]=github.com/containernetworking/plugins/plugins/main/loopback
# OUT: the path under bin/ when it is not the tool's name (the 1.36 binaries keep the upstream names in
# their own directory, so KUBEBUILDER_ASSETS / HYPERBATCH_BIN can point at it).
declare -A OUT=([kube-apiserver-1.36]=k8s-1.36/kube-apiserver [kube-controller-manager-1.36]=k8s-1.36/kube-controller-manager
  [cni-bridge]=cni/bridge [cni-host-local]=cni/host-local [cni-loopback]=cni/loopback)
# Static builds (CGO off) where the binary runs outside the host's libc or must not need C headers:
# containerd without cgo leaves out the btrfs snapshotter (it needs libbtrfs headers); the CNI
# plugins run in any network namespace. A tool module's tools are built in one invocation, so this is
# decided per group: every tool of the containerd and cni groups is listed.
declare -A NOCGO=([containerd]=1 [containerd-shim-runc-v2]=1 [ctr]=1 [cni-bridge]=1 [cni-host-local]=1 [cni-loopback]=1)
NODE_TOOLS="kubelet kube-proxy kube-scheduler containerd containerd-shim-runc-v2 ctr cni-bridge cni-host-local cni-loopback"
ALL="etcd kube-apiserver kube-controller-manager kubectl kwok controller-gen helm golangci-lint vc-controller-manager vc-webhook-manager vc-scheduler jobset-controller trainer-controller-manager karmada-aggregated-apiserver karmada-webhook karmada-controller-manager karmada-scheduler"

CACHE=${HYPERBATCH_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/hyperbatch/tools}
[ "$CACHE" = off ] || mkdir -p "$CACHE" 2>/dev/null || { echo "hack/tools.sh: cannot create the tool cache $CACHE; building without it" >&2; CACHE=off; }

# to_cache bin cached: best effort (a full disk or read-only cache only costs the next clone a build);
# the copy is renamed into place so a concurrent clone never runs a half-written binary.
to_cache() {
  cp "$1" "$2.tmp.$$" 2>/dev/null && mv "$2.tmp.$$" "$2" 2>/dev/null || rm -f "$2.tmp.$$"
}

stamp_of() { # tool -> stamp text
  local dir=hack/tools/${GROUP[$1]}
  echo "$1 ${PKG[$1]} $(cat "$dir/go.mod" "$dir/go.sum" | sha256sum | cut -c1-16) $(go env GOVERSION)"
}

# est_of tool -> "~Ns" from the tool's last build on this machine (kept beside the tool cache), or "".
TIMES=
[ "$CACHE" = off ] || { TIMES=$CACHE/.times; mkdir -p "$TIMES" 2>/dev/null || TIMES=; }
est_of() { [ -n "$TIMES" ] && [ -f "$TIMES/$1" ] && echo "last build $(cat "$TIMES/$1")s" || true; }

# ready tool: 0 when bin/ or the tool cache already has the tool at its stamp (copying it from the
# cache), 1 when it must be built.
ready() {
  local tool=$1
  [ -n "${PKG[$tool]:-}" ] || die "unknown tool '$tool'. Known tools: $ALL kube-apiserver-1.36 kube-controller-manager-1.36 kueue-manager $NODE_TOOLS"
  local out=$BIN/${OUT[$tool]:-$tool} stampf=$BIN/.$tool.stamp want cached=
  mkdir -p "$(dirname "$out")"
  want=$(stamp_of "$tool")
  [ "$CACHE" = off ] || cached=$CACHE/$tool-$(printf '%s' "$want" | sha256sum | cut -c1-16)
  if [ -x "$out" ] && [ -f "$stampf" ] && [ "$(cat "$stampf")" = "$want" ]; then
    echo "  $tool: up to date ($out)"
    [ -z "$cached" ] || [ -x "$cached" ] || to_cache "$out" "$cached"
    return 0
  fi
  if [ -n "$cached" ] && [ -x "$cached" ]; then
    cp "$cached" "$out.tmp" && mv "$out.tmp" "$out"
    echo "$want" > "$stampf"
    echo "  $tool: copied from the tool cache ($cached)"
    return 0
  fi
  return 1
}

ldflags_of() { # group -> ldflags
  local g=$1 pinned
  if [ -n "${K8S_VERSION[$g]:-}" ]; then
    pinned=$(awk '$1=="k8s.io/kubernetes"{print $2; exit}' "hack/tools/$g/go.mod")
    [ "$pinned" = "${K8S_VERSION[$g]}" ] || die "hack/tools/$g/go.mod pins k8s.io/kubernetes $pinned but hack/tools.sh stamps ${K8S_VERSION[$g]} (K8S_VERSION); make them agree"
    k8s_ldflags "${K8S_VERSION[$g]}"
  elif [ "$g" = containerd ]; then echo "-s -w -X github.com/containerd/containerd/v2/version.Version=$(awk '$1=="github.com/containerd/containerd/v2"{print $2; exit}' "hack/tools/$g/go.mod")"
  elif [ "$g" = karmada ]; then echo "-s -w -X github.com/karmada-io/karmada/pkg/version.gitVersion=$(awk '$1=="github.com/karmada-io/karmada"{print $2; exit}' "hack/tools/$g/go.mod")"
  else echo "-s -w"; fi
}

# build_group n m group tool...: the group's missing tools in one `go build -o DIR` invocation (the go
# command then schedules every compile and link of the group in one action graph), then each binary is
# moved into place with its stamp and copied to the tool cache.
build_group() {
  local n=$1 m=$2 g=$3; shift 3
  local dir=hack/tools/$g start=$SECONDS log tmp pkgs=() t est=() e
  for t in "$@"; do pkgs+=("${PKG[$t]}"); e=$(est_of "$t"); [ -z "$e" ] || est+=("$t $e"); done
  tmp=$(mktemp -d "$BIN/.build-$g.XXXXXX")
  log=$tmp/build.log
  local what="$*"
  echo "  [$n/$m] $what: building (pinned in $dir/go.mod)${est:+; $(IFS=,; echo "${est[*]}" | sed 's/,/, /g')} ..."
  local cgo=${CGO_ENABLED:-} ldflags
  [ -z "${NOCGO[$1]:-}" ] || cgo=0
  ldflags=$(ldflags_of "$g")
  if ! (cd "$dir" && CGO_ENABLED=${cgo:-$(go env CGO_ENABLED)} go build -ldflags "$ldflags" -o "$tmp/" "${pkgs[@]}") >"$log" 2>&1; then
    tail -n 30 "$log" >&2
    rm -rf "$tmp"
    die "building $what failed (see the compiler output above). Check that the Go module proxy is reachable (GOPROXY=$(go env GOPROXY)) and that $dir/go.sum is intact (cd $dir && go mod verify), then run 'make tools' again."
  fi
  local secs=$((SECONDS - start)) out want cached base
  for t in "$@"; do
    base=${PKG[$t]##*/}; [ "$base" != v2 ] && [ "$base" != v3 ] || base=$(basename "$(dirname "${PKG[$t]}")")
    out=$BIN/${OUT[$t]:-$t}
    mv "$tmp/$base" "$out"
    want=$(stamp_of "$t")
    echo "$want" > "$BIN/.$t.stamp"
    [ "$CACHE" = off ] || to_cache "$out" "$CACHE/$t-$(printf '%s' "$want" | sha256sum | cut -c1-16)"
    # A group's time is the time of its one invocation; each of its tools records it as its estimate.
    [ -z "$TIMES" ] || echo "$secs" > "$TIMES/$t"
  done
  rm -rf "$tmp"
  echo "  [$n/$m] $what: built in ${secs}s (elapsed $((SECONDS - total))s)"
}

# kwok_stages: since v0.8.0 the kwok binary has no built-in stages ("no stages found"; kwokctl writes
# them into its config). bin/kwok-stages.yaml is kwokctl's default set, printed from kwok's own embedded
# stage files at the pinned version (hack/tools/kwok/stages); the local clusters pass it with --config.
kwok_stages() {
  local out=$BIN/kwok-stages.yaml stampf=$BIN/.kwok-stages.stamp want
  want=$(stamp_of kwok)
  if [ -f "$out" ] && [ -f "$stampf" ] && [ "$(cat "$stampf")" = "$want" ]; then
    echo "  kwok-stages: up to date ($out)"
    return 0
  fi
  (cd hack/tools/kwok && go run ./stages) > "$out.tmp" || { rm -f "$out.tmp"; die "writing kwok's default stages failed (cd hack/tools/kwok && go run ./stages)"; }
  mv "$out.tmp" "$out"
  echo "$want" > "$stampf"
  echo "  kwok-stages: written ($out)"
}

tools=("$@")
[ ${#tools[@]} -gt 0 ] || read -r -a tools <<< "$ALL"
total=$SECONDS

# Which tools must be built, grouped by tool module in first-seen order.
declare -A TODO
order=()
for t in "${tools[@]}"; do
  if ready "$t"; then continue; fi
  g=${GROUP[$t]}
  [ -n "${TODO[$g]:-}" ] || order+=("$g")
  TODO[$g]="${TODO[$g]:-} $t"
done

if [ ${#order[@]} -gt 0 ]; then
  # Downloads overlap compiles: every group's modules are fetched concurrently now, while the first
  # group compiles (its own `go build` fetches what it still lacks; the module cache is safe for
  # concurrent go commands). A failed prefetch is only reported: the build that needs it fails clearly.
  dl=$(mktemp -d)
  for g in "${order[@]:1}"; do
    (cd "hack/tools/$g" && go mod download) >"$dl/$g.log" 2>&1 &
  done
  m=0; for g in "${order[@]}"; do read -r -a ts <<< "${TODO[$g]}"; m=$((m + ${#ts[@]})); done
  n=0
  for g in "${order[@]}"; do
    read -r -a ts <<< "${TODO[$g]}"
    n=$((n + ${#ts[@]}))
    if [ ${#ts[@]} -gt 1 ]; then label="$((n - ${#ts[@]} + 1))-$n"; else label=$n; fi
    build_group "$label" "$m" "$g" "${ts[@]}"
  done
  wait
  rm -rf "$dl"
fi
for t in "${tools[@]}"; do [ "$t" != kwok ] || kwok_stages; done
echo "tools ready in $BIN ($((SECONDS - total))s)"
