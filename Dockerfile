# One image with both binaries: /manager (webhooks + controllers) and /scheduler (kube-scheduler with
# hyperbatch's plugins). Used by the Helm chart and test/kind; not needed for `make run`.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# The scheduler reports the Kubernetes version it is built from (k8s.io/kubernetes in go.mod), as make
# build stamps it; the chart's kubeVersion follows that minor (docs/compatibility.md).
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o /out/manager ./cmd/manager && \
    v=$(awk '$1=="k8s.io/kubernetes"{print $2; exit}' go.mod) && minor=$(echo "$v" | cut -d. -f2) && \
    CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X k8s.io/component-base/version.gitVersion=$v -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor -X k8s.io/component-base/version.gitTreeState=clean" -o /out/scheduler ./cmd/scheduler

FROM gcr.io/distroless/static:nonroot
COPY --from=build /out/manager /out/scheduler /
USER 65532:65532
