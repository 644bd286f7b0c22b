# For users with Docker. The project itself builds its runtime images without
# Docker (make xpkg, go-containerregistry); both give a static, non-root
# image. Build either binary:
#   docker build --build-arg BINARY=function-kausality -t function-kausality .
#   docker build --build-arg BINARY=provider-kausality -t provider-kausality .
FROM golang:1.26 AS build
ARG BINARY=function-kausality
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN case "$BINARY" in \
      function-kausality) pkg=./fn ;; \
      provider-kausality) pkg=./provider ;; \
      *) echo "unknown BINARY $BINARY" >&2; exit 1 ;; \
    esac && CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/app "$pkg"

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/app /app
EXPOSE 9443 8080 8081
USER nonroot:nonroot
ENTRYPOINT ["/app"]
