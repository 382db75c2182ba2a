// Command sample runs one member of ferry's sample cluster: a kv store
// member, an api member, the load balancer or a coordinator. It only wires flags to
// the packages; version and fault are set at build time so that ferry's
// demo has several distinguishable (and some deliberately broken)
// releases of one program to upgrade between:
//
//	go build -ldflags "-X main.version=2.0.0 -X main.fault=never-ready" ./examples/sample/cmd/sample
package main
