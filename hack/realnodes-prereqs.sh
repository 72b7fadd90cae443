#!/usr/bin/env bash
# Installs what the real nodes of the local cluster (`make run REAL_NODES=2`, hack/localcluster
# --real-nodes) need from the machine and hack/tools.sh does not build: runc (the OCI runtime
# containerd's shim runs), iptables (kube-proxy's rules) and iproute2 (the bridge). Idempotent: it asks
# apt-get only for what is missing, and does nothing when everything is there. Needs root.
set -euo pipefail

die() { echo "hack/realnodes-prereqs.sh: $*" >&2; exit 1; }

# command -> Debian package
declare -A PKG=([runc]=runc [iptables]=iptables [iptables-save]=iptables [iptables-restore]=iptables [ip]=iproute2)
missing=()
for cmd in runc iptables iptables-save iptables-restore ip; do
  if ! command -v "$cmd" >/dev/null 2>&1 && [ ! -x "/usr/sbin/$cmd" ] && [ ! -x "/sbin/$cmd" ]; then
    p=${PKG[$cmd]}
    case " ${missing[*]:-} " in *" $p "*) ;; *) missing+=("$p") ;; esac
  fi
done

if [ ${#missing[@]} -gt 0 ]; then
  [ "$(id -u)" = 0 ] || die "missing ${missing[*]}; run this script as root (it runs apt-get install -y ${missing[*]})"
  command -v apt-get >/dev/null 2>&1 || die "missing ${missing[*]} and no apt-get here: install them with this system's package manager"
  echo "installing ${missing[*]} (apt-get) ..."
  apt-get install -y "${missing[@]}" || { apt-get update && apt-get install -y "${missing[@]}"; } || die "apt-get install ${missing[*]} failed"
else
  echo "runc, iptables and iproute2 are installed"
fi

# What apt-get cannot fix is only reported: the kernel's overlay filesystem and the cgroup v1
# controllers the kubelet and runc use (hack/localcluster checks them again with the fix).
grep -q $'\toverlay$' /proc/filesystems || echo "warning: no overlay filesystem in this kernel (modprobe overlay); containerd's overlayfs snapshotter needs it" >&2
if [ -f /sys/fs/cgroup/cgroup.controllers ]; then
  echo "warning: this host mounts cgroup v2 only; the real-node mode drives cgroup v1 (or hybrid) hierarchies only" >&2
else
  for c in cpu cpuacct cpuset memory pids devices freezer; do
    [ -f "/sys/fs/cgroup/$c/cgroup.procs" ] || echo "warning: cgroup v1 controller $c is not mounted at /sys/fs/cgroup/$c" >&2
  done
fi
echo "real-node prerequisites ready"
