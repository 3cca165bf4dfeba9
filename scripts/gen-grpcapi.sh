#!/usr/bin/env bash
# gen-grpcapi.sh regenerates the Go code of the example's gRPC/Connect face
# (example/grpcapi/paymentsv1) from its proto. The generated code is
# committed, so neither the build nor CI needs protoc; run this after
# changing the proto. It needs protoc (Debian: apt-get install
# protobuf-compiler) and installs the Go plugins, at the versions the
# module requires, into $(go env GOPATH)/bin.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../example/grpcapi"

command -v protoc >/dev/null || {
	echo "gen-grpcapi: protoc not found: apt-get install protobuf-compiler" >&2
	exit 1
}
ver() { go list -m -f '{{.Version}}' "$1"; }
go install "google.golang.org/protobuf/cmd/protoc-gen-go@$(ver google.golang.org/protobuf)"
go install "connectrpc.com/connect/cmd/protoc-gen-connect-go@$(ver connectrpc.com/connect)"
go install google.golang.org/grpc/cmd/protoc-gen-go-grpc@v1.6.2
export PATH="$(go env GOPATH)/bin:$PATH"

protoc -I proto \
	--go_out=. --go_opt=module=github.com/idemgen/idemgen/example/grpcapi \
	--go-grpc_out=. --go-grpc_opt=module=github.com/idemgen/idemgen/example/grpcapi \
	--connect-go_out=. --connect-go_opt=module=github.com/idemgen/idemgen/example/grpcapi \
	idemgen/example/payments/v1/payments.proto
