#!/bin/sh
# Builds the real Kubernetes parts the tests start, once, into a cache
# that a warm `make test` reuses, and prints its folder:
#   kube-apiserver, kube-controller-manager, kube-scheduler, kubectl,
#     kubelet from k8s.io/kubernetes (ci/kube/go.mod: v1.37.2, its 33 staging
#     modules replaced by their v0.37.2 releases);
#   helm from helm.sh/helm/v4 at HELM_VERSION.
# Cold: about 10 minutes of two cores here (587 s); warm: nothing. etcd is
# Debian's etcd-server (ci/ci-packages.txt).
#
#   usage: ci/kube-tools.sh [DIR]    (default: $XDG_CACHE_HOME/rdmabench/...)
set -eu
HELM_VERSION=v4.3.2
KUBE_VERSION=v1.37.2 # ci/kube/go.mod's k8s.io/kubernetes
here=$(cd "$(dirname "$0")" && pwd)
key=$(cat "$here/kube/go.mod" "$here/kube/go.sum" "$0" | sha256sum | cut -c1-12)
cache=${XDG_CACHE_HOME:-$HOME/.cache}/rdmabench
dir=${1:-$cache/kube-tools-$key}
if [ -z "${1:-}" ] && [ -d "$cache" ]; then
	# Other keys' builds (about 400 MB each) unused for a week: another
	# checkout may still use a newer one.
	find "$cache" -maxdepth 1 -name 'kube-tools-*' ! -name "kube-tools-$key" -mtime +7 -exec rm -rf {} + 2>/dev/null || true
fi
mkdir -p "$dir"
touch "$dir"
if [ ! -x "$dir/kubectl" ] || [ ! -x "$dir/kube-apiserver" ] ||
   [ ! -x "$dir/kube-controller-manager" ] || [ ! -x "$dir/kube-scheduler" ] ||
   [ ! -x "$dir/kubelet" ]; then
	echo "ci/kube-tools.sh: building Kubernetes v1.37.2 into $dir (cold: about 10 minutes)" >&2
	# The version each binary reports (kubectl version, the components'
	# logs), as Kubernetes' own build stamps it.
	v=k8s.io/component-base/version
	stamp="-X $v.gitVersion=$KUBE_VERSION -X $v.gitMajor=1 -X $v.gitMinor=37 -X $v.gitTreeState=clean"
	(cd "$here/kube" && CGO_ENABLED=0 go build -trimpath -ldflags="-s $stamp" -o "$dir/" \
		k8s.io/kubernetes/cmd/kube-apiserver \
		k8s.io/kubernetes/cmd/kube-controller-manager \
		k8s.io/kubernetes/cmd/kube-scheduler \
		k8s.io/kubernetes/cmd/kubectl \
		k8s.io/kubernetes/cmd/kubelet) >&2
fi
if [ ! -x "$dir/helm" ]; then
	echo "ci/kube-tools.sh: building helm $HELM_VERSION into $dir" >&2
	CGO_ENABLED=0 GOBIN="$dir" go install -trimpath \
		-ldflags="-s -X helm.sh/helm/v4/internal/version.version=$HELM_VERSION -X helm.sh/helm/v4/internal/version.gitTreeState=clean" \
		"helm.sh/helm/v4/cmd/helm@$HELM_VERSION" >&2
fi
echo "$dir"
