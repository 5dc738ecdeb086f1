// Package runtimepb holds the runtime service shared by plugins, the daemon and
// the host. The generated code is committed so that building rlm needs no
// protoc; `go generate ./core/runtimepb` (or `make proto`) rebuilds it with the
// pinned generator versions below and Debian's protoc (apt-get install
// protobuf-compiler).
package runtimepb

//go:generate sh -c "GOBIN=$(go env GOPATH)/bin/rlm-protogen go install google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12"
//go:generate sh -c "GOBIN=$(go env GOPATH)/bin/rlm-protogen go install google.golang.org/grpc/cmd/protoc-gen-go-grpc@v1.5.1"
//go:generate sh -c "PATH=$(go env GOPATH)/bin/rlm-protogen:$PATH protoc --go_out=. --go_opt=paths=source_relative --go-grpc_out=. --go-grpc_opt=paths=source_relative runtime.proto"
