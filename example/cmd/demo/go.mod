module github.com/idemgen/idemgen/example/cmd/demo

go 1.26.0

replace (
	github.com/idemgen/idemgen => ../../..
	github.com/idemgen/idemgen/example/grpcapi => ../../grpcapi
	github.com/idemgen/idemgen/example/outbox => ../../outbox
	github.com/idemgen/idemgen/internal/faults/linear => ../../../internal/faults/linear
	github.com/idemgen/idemgen/runtime/idemconnect => ../../../runtime/idemconnect
	github.com/idemgen/idemgen/runtime/idemgrpc => ../../../runtime/idemgrpc
	github.com/idemgen/idemgen/runtime/idemproto => ../../../runtime/idemproto
	github.com/idemgen/idemgen/runtime/idemriver => ../../../runtime/idemriver
)

require (
	connectrpc.com/connect v1.21.1
	github.com/idemgen/idemgen v0.0.0-00010101000000-000000000000
	github.com/idemgen/idemgen/example/grpcapi v0.0.0-00010101000000-000000000000
	github.com/idemgen/idemgen/example/outbox v0.0.0-00010101000000-000000000000
	github.com/idemgen/idemgen/internal/faults/linear v0.0.0-00010101000000-000000000000
	github.com/idemgen/idemgen/runtime/idemconnect v0.0.0-00010101000000-000000000000
	github.com/idemgen/idemgen/runtime/idemgrpc v0.0.0-00010101000000-000000000000
	github.com/jackc/pgx/v5 v5.13.0
	github.com/pressly/goose/v3 v3.30.1
	github.com/riverqueue/river v0.51.2
	github.com/riverqueue/river/riverdriver/riverpgxv5 v0.51.2
	github.com/riverqueue/river/rivertype v0.51.2
	github.com/stretchr/testify v1.12.1
	google.golang.org/grpc v1.85.0
)

require (
	github.com/anishathalye/porcupine v1.3.1 // indirect
	github.com/idemgen/idemgen/runtime/idemproto v0.0.0-00010101000000-000000000000 // indirect
	github.com/idemgen/idemgen/runtime/idemriver v0.0.0-00010101000000-000000000000 // indirect
	github.com/jackc/pgpassfile v1.0.0 // indirect
	github.com/jackc/pgservicefile v0.0.0-20240606120523-5a60cdf6a761 // indirect
	github.com/jackc/puddle/v2 v2.2.3 // indirect
	github.com/lib/pq v1.12.3 // indirect
	github.com/mfridman/interpolate v0.2.0 // indirect
	github.com/riverqueue/river/riverdriver v0.51.2 // indirect
	github.com/riverqueue/river/riverdriver/riverdatabasesql v0.51.2 // indirect
	github.com/riverqueue/river/rivershared v0.51.2 // indirect
	github.com/sethvargo/go-retry v0.5.0 // indirect
	github.com/tidwall/gjson v1.20.0 // indirect
	github.com/tidwall/match v1.2.0 // indirect
	github.com/tidwall/pretty v1.2.1 // indirect
	github.com/tidwall/sjson v1.2.5 // indirect
	go.uber.org/multierr v1.11.0 // indirect
	go.yaml.in/yaml/v3 v3.0.6 // indirect
	golang.org/x/net v0.62.0 // indirect
	golang.org/x/sync v0.25.0 // indirect
	golang.org/x/sys v0.50.0 // indirect
	golang.org/x/text v0.44.0 // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20261110000943-09e21b237f2c // indirect
	google.golang.org/protobuf v1.36.12 // indirect
)
