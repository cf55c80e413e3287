#!/bin/sh
# Regenerates the Go code of the envd process and filesystem services from
# proto/process/process.proto and proto/filesystem/filesystem.proto.
# CI never runs this; the generated files are committed. Made with:
#   protoc 3.21.12 (Debian bookworm: apt-get install -y protobuf-compiler)
#   protoc-gen-go v1.36.12         (go install google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12)
#   protoc-gen-connect-go v1.21.1  (go install connectrpc.com/connect/cmd/protoc-gen-connect-go@v1.21.1)
# Run from this directory with both plugins on PATH.
set -eu
cd "$(dirname "$0")"
protoc -I proto \
	--go_out=. --go_opt=module=github.com/corral-sh/corral/api/envd \
	--connect-go_out=. --connect-go_opt=module=github.com/corral-sh/corral/api/envd \
	proto/process/process.proto
protoc -I proto \
	--go_out=. --go_opt=module=github.com/corral-sh/corral/api/envd \
	--connect-go_out=. --connect-go_opt=module=github.com/corral-sh/corral/api/envd \
	proto/filesystem/filesystem.proto
