# One image with both binaries: /manager (webhooks + controllers) and /scheduler (kube-scheduler with
# hyperbatch's plugins). Used by the Helm chart and test/kind; not needed for `make run`.
FROM golang:1.25 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o /out/manager ./cmd/manager && \
    CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o /out/scheduler ./cmd/scheduler

FROM gcr.io/distroless/static:nonroot
COPY --from=build /out/manager /out/scheduler /
USER 65532:65532
