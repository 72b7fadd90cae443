// Module fabric pins the public modules whose fabric captures and expected trees the HyperNode
// discovery tests read from the Go module cache (hypernodetest.ModuleDir): NVIDIA Topograph's
// ibnetdiscover capture of a DGX H100 cluster (tests/output/ibnetdiscover/example.out) and the trees
// its own tests expect from it. Nothing of it is built or copied into the repository.
module github.com/hyperbatch/hyperbatch/hack/tools/fabric

go 1.24.0

require github.com/NVIDIA/topograph v0.3.0
