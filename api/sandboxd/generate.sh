#!/bin/sh
# Regenerates the Go code of sandboxd's process service from
# proto/process/v1/process.proto, copied unchanged from
# kubernetes-sigs/agent-sandbox v1.0.1 packages/sandboxd/spec/process/v1/process.proto
# (Apache-2.0). CI never runs this; the generated files are committed. Made with:
#   protoc 3.21.12 (Debian bookworm: apt-get install -y protobuf-compiler)
#   protoc-gen-go v1.36.12      (go install google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12)
#   protoc-gen-go-grpc v1.6.1   (go install google.golang.org/grpc/cmd/protoc-gen-go-grpc@v1.6.1)
# Run from this directory with both plugins on PATH. The proto's go_package
# names agent-sandbox's module; the M options place the code here instead,
# under the same proto file name and package (process.v1), so the wire is
# the same.
set -eu
cd "$(dirname "$0")"
pkg=github.com/corral-sh/corral/api/sandboxd/processpb
protoc -I proto \
	--go_out=. --go_opt=module=github.com/corral-sh/corral/api/sandboxd \
	--go_opt=Mprocess/v1/process.proto="$pkg;processpb" \
	--go-grpc_out=. --go-grpc_opt=module=github.com/corral-sh/corral/api/sandboxd \
	--go-grpc_opt=Mprocess/v1/process.proto="$pkg;processpb" \
	process/v1/process.proto
