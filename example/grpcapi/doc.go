// Package grpcapi is the gRPC and Connect face of the example payments
// service (package example): the proto in proto/, the code generated from
// it in paymentsv1 (committed; scripts/gen-grpcapi.sh regenerates it), the
// service's methods on the proto messages ([Payments], annotated as they
// are: idemgen fingerprints the request messages and stores the response
// messages through runtime/idemproto), and the service over grpc-go
// ([NewGRPCServer], behind runtime/idemgrpc) and over connect-go
// ([NewConnectHandler], behind runtime/idemconnect).
//
// It is a module of its own, so the example and the root module never
// require grpc-go, connect-go or protobuf.
package grpcapi
