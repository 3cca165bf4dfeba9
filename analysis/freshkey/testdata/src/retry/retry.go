package retry

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"fmt"
	"math/rand"
	"net/http"
	"strconv"
	"time"

	"connectrpc.com/connect"
	"github.com/cenkalti/backoff/v4"
	"github.com/google/uuid"
	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/idemhttp"
	"google.golang.org/grpc/metadata"
)

func charge(ctx context.Context) error { return nil }

// ChargeRetry mints a key per attempt: each retry is a new charge.
func ChargeRetry(ctx context.Context) error {
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		kctx := idem.ContextWithKey(ctx, uuid.NewString()) // want `idempotency key made from uuid.NewString inside the loop that sends it \(idem.ContextWithKey, sent at line 28\): every iteration is a new key, so a retry is a new request that runs again; make the key once before the loop, where the intention is born, or derive it from the data it stands for`
		if err = charge(kctx); err == nil {
			return nil
		}
	}
	return err
}

// ChargeReassign reassigns ctx through a timeout: followed.
func ChargeReassign(ctx context.Context) {
	for {
		ctx = idem.ContextWithKey(ctx, fmt.Sprintf("charge-%d", time.Now().UnixNano())) // want `made from time.Now inside the loop`
		tctx, cancel := context.WithTimeout(ctx, time.Second)
		err := charge(tctx)
		cancel()
		if err == nil {
			return
		}
	}
}

// PostRetry sets the header from a local variable.
func PostRetry(ctx context.Context, url string) (*http.Response, error) {
	for {
		key := uuid.New().String() // want `made from uuid.New inside the loop that sends it \(an Idempotency-Key header`
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, nil)
		if err != nil {
			return nil, err
		}
		req.Header.Set("Idempotency-Key", key)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			return resp, nil
		}
	}
}

// PostMap assigns the header by hand, not canonical.
func PostMap(ctx context.Context, req *http.Request) {
	for i := range 3 {
		_ = i
		req.Header["idempotency-key"] = []string{strconv.Itoa(rand.Int())} // want `made from rand.Int inside the loop that sends it \(an Idempotency-Key header`
		if _, err := http.DefaultClient.Do(req); err == nil {
			return
		}
	}
}

// PostAdd reads random bytes into a buffer: idemhttp's constant names the header.
func PostAdd(ctx context.Context, req *http.Request) {
	for {
		var b [16]byte
		_, _ = crand.Read(b[:]) // want `made from rand.Read inside the loop`
		req.Header.Add(idemhttp.HeaderKey, hex.EncodeToString(b[:]))
		if _, err := http.DefaultClient.Do(req); err == nil {
			return
		}
	}
}

// PostHeader builds the header apart and hangs it on the request.
func PostHeader(ctx context.Context, req *http.Request) {
	for {
		h := http.Header{}
		h.Set("IDEMPOTENCY-KEY", uuid.NewString()) // want `made from uuid.NewString`
		req.Header = h
		if _, err := http.DefaultClient.Do(req); err == nil {
			return
		}
	}
}

func invoke(ctx context.Context, method string) error { return nil }

// GRPCRetry sets the metadata key per attempt.
func GRPCRetry(ctx context.Context) {
	for range 3 {
		mctx := metadata.AppendToOutgoingContext(ctx, "idempotency-key", uuid.NewString()) // want `made from uuid.NewString inside the loop that sends it \(the idempotency-key gRPC metadata`
		if invoke(mctx, "/pay.Payments/Charge") == nil {
			return
		}
	}
}

// GRPCPairs builds the metadata apart.
func GRPCPairs(ctx context.Context) {
	for range 3 {
		md := metadata.Pairs("trace", "x", "idempotency-key", uuid.NewString()) // want `made from uuid.NewString`
		if invoke(metadata.NewOutgoingContext(ctx, md), "/pay.Payments/Charge") == nil {
			return
		}
	}
}

// GRPCSet sets the key on metadata made apart, with MD.Set and MD.Append.
func GRPCSet(ctx context.Context) {
	for range 3 {
		md := metadata.MD{}
		md.Set("trace", uuid.NewString())
		md.Set("Idempotency-Key", time.Now().String()) // want `made from time.Now`
		if invoke(metadata.NewOutgoingContext(ctx, md), "/pay.Payments/Charge") == nil {
			return
		}
		md2 := metadata.MD{}
		md2.Append("idempotency-key", "a", uuid.New().String()) // want `made from uuid.New inside`
		if invoke(metadata.NewOutgoingContext(ctx, md2), "/pay.Payments/Charge") == nil {
			return
		}
	}
}

// GRPCMap assigns the metadata key by hand.
func GRPCMap(ctx context.Context) {
	for range 3 {
		md := metadata.MD{"idempotency-key": {uuid.NewString()}} // want `made from uuid.NewString inside the loop that sends it \(the idempotency-key gRPC metadata`
		if invoke(metadata.NewOutgoingContext(ctx, md), "/pay.Payments/Charge") == nil {
			return
		}
	}
}

type ChargeRequest struct {
	RequestId string
	Amount    int64
}

type Client struct{}

func (c *Client) Charge(ctx context.Context, req *connect.Request[ChargeRequest]) error { return nil }

func (c *Client) ChargeMsg(ctx context.Context, req *ChargeRequest) error { return nil }

// ConnectRetry sets the header of a Connect request per attempt.
func ConnectRetry(ctx context.Context, c *Client) {
	for {
		req := connect.NewRequest(&ChargeRequest{Amount: 1})
		req.Header().Set("Idempotency-Key", uuid.NewString()) // want `made from uuid.NewString`
		if c.Charge(ctx, req) == nil {
			return
		}
	}
}

// RequestIDRetry sets the AIP-155 request_id per attempt.
func RequestIDRetry(ctx context.Context, c *Client, msg *ChargeRequest) {
	for {
		msg.RequestId = uuid.NewString() // want `made from uuid.NewString inside the loop that sends it \(an AIP-155 request_id`
		if c.ChargeMsg(ctx, msg) == nil {
			return
		}
	}
}

// InPlace: a function literal called where it is written is the loop's body.
func InPlace(ctx context.Context) {
	for {
		err := func() error {
			return charge(idem.ContextWithKey(ctx, uuid.NewString())) // want `made from uuid.NewString`
		}()
		if err == nil {
			return
		}
	}
}

// Backoff: the function a retry library calls again is the loop.
func Backoff(ctx context.Context, b backoff.BackOff) error {
	return backoff.Retry(func() error {
		return charge(idem.ContextWithKey(ctx, uuid.NewString())) // want `made from uuid.NewString inside the loop`
	}, b)
}

// BackoffOnce makes the key before handing the retry to the library.
func BackoffOnce(ctx context.Context, b backoff.BackOff) error {
	kctx := idem.ContextWithKey(ctx, uuid.NewString())
	return backoff.Retry(func() error { return charge(kctx) }, b)
}
