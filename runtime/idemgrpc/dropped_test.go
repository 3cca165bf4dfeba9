package idemgrpc_test

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"

	"github.com/idemgen/idemgen/runtime/idemgrpc"
)

// cutProxy is a TCP proxy in front of the test server that cuts some of the
// connections it accepts before any request on them reaches the server: it
// passes the HTTP/2 preface and the frames before the first request's
// HEADERS frame, then closes both sides. Whether the i-th connection (from
// 1) is cut is cut(i), decided when it is accepted.
type cutProxy struct {
	ln       net.Listener
	target   string
	cut      func(i int) bool
	accepted atomic.Int64

	mu     sync.Mutex
	doomed map[string]bool          // client address → its connection is to be cut
	ended  map[string]chan struct{} // client address → closed when the client's transport has closed
}

func newCutProxy(t *testing.T, target string, cut func(i int) bool) *cutProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &cutProxy{ln: ln, target: target, cut: cut, doomed: map[string]bool{}, ended: map[string]chan struct{}{}}
	var wg sync.WaitGroup
	t.Cleanup(func() { _ = ln.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			i := int(p.accepted.Add(1))
			doomed := p.cut(i)
			p.mu.Lock()
			p.doomed[c.RemoteAddr().String()] = doomed
			p.ended[c.RemoteAddr().String()] = make(chan struct{})
			p.mu.Unlock()
			wg.Go(func() { p.serve(c, doomed) })
		}
	})
	return p
}

func (p *cutProxy) addr() string { return p.ln.Addr().String() }

func (p *cutProxy) serve(client net.Conn, doomed bool) {
	defer client.Close()
	server, err := net.Dial("tcp", p.target)
	if err != nil {
		return
	}
	defer server.Close()
	go func() {
		_, _ = io.Copy(client, server)
		_ = client.Close()
	}()
	if !doomed {
		_, _ = io.Copy(server, client)
		return
	}
	const preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
	if _, err := io.CopyN(server, client, int64(len(preface))); err != nil {
		return
	}
	for {
		var head [9]byte // length (24 bits), type, flags, stream id
		if _, err := io.ReadFull(client, head[:]); err != nil {
			return
		}
		const typeHeaders = 0x1
		if head[3] == typeHeaders {
			return // the request's HEADERS: cut both sides, the server never sees it
		}
		n := int64(binary.BigEndian.Uint32(append([]byte{0}, head[:3]...)))
		if _, err := server.Write(head[:]); err != nil {
			return
		}
		if _, err := io.CopyN(server, client, n); err != nil {
			return
		}
	}
}

// endedChan returns the channel closed when the client's transport from
// addr has closed.
func (p *cutProxy) endedChan(addr string) chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	ch, ok := p.ended[addr]
	if !ok {
		ch = make(chan struct{})
		p.ended[addr] = ch
	}
	return ch
}

func (p *cutProxy) isDoomed(addr string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.doomed[addr]
}

type connAddr struct{}

// TagConn implements stats.Handler.
func (p *cutProxy) TagConn(ctx context.Context, info *stats.ConnTagInfo) context.Context {
	return context.WithValue(ctx, connAddr{}, info.LocalAddr.String())
}

// HandleConn implements stats.Handler: it notes that a client transport has
// closed, after grpc-go has ended every stream on it.
func (p *cutProxy) HandleConn(ctx context.Context, s stats.ConnStats) {
	if _, ok := s.(*stats.ConnEnd); ok {
		if addr, ok := ctx.Value(connAddr{}).(string); ok {
			ch := p.endedChan(addr)
			select {
			case <-ch:
			default:
				close(ch)
			}
		}
	}
}

// TagRPC implements stats.Handler.
func (p *cutProxy) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context { return ctx }

// HandleRPC implements stats.Handler. grpc-go calls it with OutHeader once
// an attempt's stream is open and before its message is sent; on a
// connection the proxy cuts, it holds the attempt there until the client
// has seen the connection close, so the message is sent on a stream that
// has ended: the drop between the stream's opening and its message, made
// certain rather than left to the race it is in production. grpc-go v1.85
// answers such an attempt with its stream's status, Unavailable, when it
// makes it alone, and with "max retries exhausted: … EOF", which is not a
// status, when it is the last attempt a retryPolicy allows.
func (p *cutProxy) HandleRPC(ctx context.Context, s stats.RPCStats) {
	h, ok := s.(*stats.OutHeader)
	if !ok || !h.Client || h.LocalAddr == nil || !p.isDoomed(h.LocalAddr.String()) {
		return
	}
	select {
	case <-p.endedChan(h.LocalAddr.String()):
	case <-ctx.Done():
	}
}

// retryLog records the errors the client interceptor retried.
type retryLog struct {
	mu   sync.Mutex
	errs []error
}

func (l *retryLog) add(_ string, _ int, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.errs = append(l.errs, err)
}

func (l *retryLog) all() []error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]error(nil), l.errs...)
}

// intentions makes n calls of Charge through p, each on a client
// connection of its own (so each meets the proxy's cuts from its first
// connection), and returns the errors of those that failed.
func intentions(t *testing.T, p *cutProxy, n int, cfg idemgrpc.ClientConfig, opts ...grpc.DialOption) []error {
	t.Helper()
	var failed []error
	for i := range n {
		cc, err := grpc.NewClient(p.addr(), append([]grpc.DialOption{
			grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithStatsHandler(p),
			grpc.WithUnaryInterceptor(idemgrpc.UnaryClientInterceptor(cfg)),
		}, opts...)...)
		require.NoError(t, err)
		if _, _, err = call(t.Context(), cc, "Charge", "acct_1", "", newReq("", int64(100+i))); err != nil {
			failed = append(failed, err)
		}
		require.NoError(t, cc.Close())
	}
	return failed
}

// retryPolicy is a service config that lets grpc-go make two attempts of
// each call on Unavailable.
var retryPolicy = grpc.WithDefaultServiceConfig(`{"methodConfig": [{"name": [{"service": "` + service + `"}],
	"retryPolicy": {"maxAttempts": 2, "initialBackoff": "0.001s", "maxBackoff": "0.01s", "backoffMultiplier": 2,
		"retryableStatusCodes": ["UNAVAILABLE"]}}]}`)

// TestClientRetriesConnectionsDroppedBeforeTheRequest: the proxy cuts the
// first connections of every intention before its request reaches the
// server, between the opening of the call's stream and its message. The
// interceptor retries each such failure with the same key, whether grpc-go
// reports it as a status (Unavailable) or as an error that is not one (the
// retryPolicy's "max retries exhausted: … EOF"), bounded by MaxAttempts:
// every intention whose attempts suffice succeeds, with exactly one effect;
// the others fail after MaxAttempts attempts, with none.
func TestClientRetriesConnectionsDroppedBeforeTheRequest(t *testing.T) {
	const n = 8
	fast := idemgrpc.ClientConfig{BaseDelay: time.Millisecond, MaxDelay: 10 * time.Millisecond}

	t.Run("without a retryPolicy", func(t *testing.T) {
		s, _ := start(t)
		p := newCutProxy(t, s.addr, func(i int) bool { return i%3 != 0 }) // two cut, one passed, per intention
		var log retryLog
		cfg := fast
		cfg.OnRetry = log.add
		assert.Empty(t, intentions(t, p, n, cfg), "every intention succeeds")
		assert.Equal(t, n, s.count(t), "one effect per intention")
		assert.Equal(t, int64(n), s.attempts.Load(), "only the attempts that passed reached the server")
		assert.Equal(t, int64(3*n), p.accepted.Load())
		errs := log.all()
		require.Len(t, errs, 2*n, "two retries per intention")
		for _, err := range errs {
			assert.Equal(t, codes.Unavailable, status.Code(err), "%v", err)
		}
	})

	t.Run("under a retryPolicy", func(t *testing.T) {
		s, _ := start(t)
		p := newCutProxy(t, s.addr, func(i int) bool { return i%4 != 0 }) // three cut, one passed, per intention
		var log retryLog
		cfg := fast
		cfg.OnRetry = log.add
		assert.Empty(t, intentions(t, p, n, cfg, retryPolicy), "every intention succeeds")
		assert.Equal(t, n, s.count(t), "one effect per intention")
		assert.Equal(t, int64(n), s.attempts.Load())
		assert.Equal(t, int64(4*n), p.accepted.Load())
		errs := log.all()
		require.Len(t, errs, n, "grpc-go's two attempts used up once per intention, then one retry of the interceptor")
		for _, err := range errs {
			assertDropped(t, err)
		}
	})

	t.Run("bounded", func(t *testing.T) {
		s, _ := start(t)
		p := newCutProxy(t, s.addr, func(int) bool { return true }) // every connection cut
		var log retryLog
		cfg := fast
		cfg.MaxAttempts = 3
		cfg.OnRetry = log.add
		failed := intentions(t, p, 3, cfg, retryPolicy)
		require.Len(t, failed, 3, "no attempt gets through")
		for _, err := range failed {
			assertDropped(t, err)
		}
		assert.Equal(t, int64(3*3*2), p.accepted.Load(), "three attempts of the interceptor per intention, two of grpc-go's in each, not one more")
		assert.Len(t, log.all(), 3*2)
		assert.Zero(t, s.count(t))
		assert.Zero(t, s.attempts.Load())
	})
}

// assertDropped checks that err is what grpc-go returns when a
// retryPolicy's last attempt met the drop: not a status.
func assertDropped(t *testing.T, err error) {
	t.Helper()
	_, isStatus := status.FromError(err)
	assert.False(t, isStatus, "not a status: %v", err)
	assert.ErrorIs(t, err, io.EOF)
	assert.Contains(t, err.Error(), "max retries exhausted")
}

// TestProxyPassesWhatItDoesNotCut checks the proxy itself: a connection it
// does not cut carries calls both ways.
func TestProxyPassesWhatItDoesNotCut(t *testing.T) {
	s, _ := start(t)
	p := newCutProxy(t, s.addr, func(int) bool { return false })
	var log retryLog
	assert.Empty(t, intentions(t, p, 2, idemgrpc.ClientConfig{OnRetry: log.add}))
	assert.Empty(t, log.all())
	assert.Equal(t, 2, s.count(t))
	assert.Equal(t, int64(2), p.accepted.Load())
}
