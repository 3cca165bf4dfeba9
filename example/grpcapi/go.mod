module github.com/idemgen/idemgen/example/grpcapi

go 1.26.0

replace (
	github.com/idemgen/idemgen => ../..
	github.com/idemgen/idemgen/internal/faults/linear => ../../internal/faults/linear
	github.com/idemgen/idemgen/runtime/idemconnect => ../../runtime/idemconnect
	github.com/idemgen/idemgen/runtime/idemgrpc => ../../runtime/idemgrpc
	github.com/idemgen/idemgen/runtime/idemproto => ../../runtime/idemproto
)

require (
	connectrpc.com/connect v1.21.1
	github.com/idemgen/idemgen v0.0.0-00010101000000-000000000000
	github.com/idemgen/idemgen/internal/faults/linear v0.0.0-00010101000000-000000000000
	github.com/idemgen/idemgen/runtime/idemconnect v0.0.0-00010101000000-000000000000
	github.com/idemgen/idemgen/runtime/idemgrpc v0.0.0-00010101000000-000000000000
	github.com/idemgen/idemgen/runtime/idemproto v0.0.0-00010101000000-000000000000
	github.com/jackc/pgx/v5 v5.13.0
	github.com/stretchr/testify v1.12.1
	google.golang.org/grpc v1.85.0
	google.golang.org/protobuf v1.36.12
)

require (
	github.com/anishathalye/porcupine v1.3.1 // indirect
	github.com/dave/jennifer v1.7.1 // indirect
	github.com/jackc/pgpassfile v1.0.0 // indirect
	github.com/jackc/pgservicefile v0.0.0-20240606120523-5a60cdf6a761 // indirect
	github.com/jackc/puddle/v2 v2.2.3 // indirect
	go.yaml.in/yaml/v3 v3.0.6 // indirect
	golang.org/x/mod v0.42.0 // indirect
	golang.org/x/net v0.61.0 // indirect
	golang.org/x/sync v0.25.0 // indirect
	golang.org/x/sys v0.49.0 // indirect
	golang.org/x/text v0.44.0 // indirect
	golang.org/x/tools v0.52.0 // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20261110000943-09e21b237f2c // indirect
)

tool github.com/idemgen/idemgen/cmd/idemgen
