// Package helm holds the tests of the Helm chart in rdmabench/: the real
// helm binary (ci/kube-tools.sh builds it; RDMABENCH_KUBE_TOOLS names its
// folder) lints the chart and renders it with several value sets, and the
// tests read the objects back. Installing it into a real API server is
// the cluster tests' part.
package helm
