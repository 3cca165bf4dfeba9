package grpcapi_test

import (
	"context"
	"io"
	"io/fs"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/idemgen/idemgen/example"
	"github.com/idemgen/idemgen/example/grpcapi"
	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/idemtest"
)

func TestMain(m *testing.M) { idemtest.Main(m) }

const seedCents = 1_000_000_000

// env is the payments service on a fresh database, served over grpc-go
// and over connect-go (h2c) on loopback, with a bank whose transfers can be
// held.
type env struct {
	db           *idemtest.DB
	grpcAddr     string // the grpc-go server
	connectURL   string // the connect-go handler, HTTP/1.1 and h2c
	bank         *heldBank
	serverCalls  serverCalls // calls that reached the grpc-go server
	connectCalls serverCalls // calls that reached the connect-go handler
}

func (e *env) connectAddr() string { return strings.TrimPrefix(e.connectURL, "http://") }

// serverCalls counts the calls that reached the grpc-go server, by code.
type serverCalls struct {
	mu    sync.Mutex
	codes map[codes.Code]int
}

func (c *serverCalls) count(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	resp, err := h(ctx, req)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.codes == nil {
		c.codes = map[codes.Code]int{}
	}
	c.codes[status.Code(err)]++
	return resp, err
}

func (c *serverCalls) connect() connect.Interceptor {
	return connect.UnaryInterceptorFunc(func(next connect.UnaryFunc) connect.UnaryFunc {
		return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
			resp, err := next(ctx, req)
			c.mu.Lock()
			defer c.mu.Unlock()
			if c.codes == nil {
				c.codes = map[codes.Code]int{}
			}
			code := codes.OK
			if err != nil {
				code = codes.Code(connect.CodeOf(err))
			}
			c.codes[code]++
			return resp, err
		}
	})
}

func (c *serverCalls) total() (all, ok int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for code, n := range c.codes {
		all += n
		if code == codes.OK {
			ok += n
		}
	}
	return all, ok
}

// heldBank is the example's fake bank, whose transfers wait while it is
// held: started receives one value per transfer that waits.
type heldBank struct {
	*example.FakeBank
	held    atomic.Bool
	started chan struct{}
	release chan struct{}
}

func (b *heldBank) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if b.held.Load() {
		b.started <- struct{}{}
		<-b.release
	}
	b.FakeBank.ServeHTTP(w, r)
}

// schema returns the Up section of the example's own migration.
func schema(t *testing.T) string {
	t.Helper()
	b, err := fs.ReadFile(example.Migrations, "migrations/00001_payments.sql")
	require.NoError(t, err)
	_, up, _ := strings.Cut(string(b), "-- +goose Up")
	up, _, _ = strings.Cut(up, "-- +goose Down")
	return up
}

func newEnv(t *testing.T, accounts ...string) *env {
	t.Helper()
	seed := make([]string, 0, len(accounts))
	for _, a := range accounts {
		seed = append(seed, `INSERT INTO balances (account, balance_cents) VALUES ('`+a+`', 1000000000)`)
	}
	e := &env{
		db:   idemtest.New(t, idemtest.WithSetup(append([]string{schema(t)}, seed...)...)),
		bank: &heldBank{FakeBank: example.NewFakeBank(), started: make(chan struct{}, 1), release: make(chan struct{})},
	}
	bank := httptest.NewServer(e.bank)
	t.Cleanup(bank.Close)
	store, err := idem.NewStore(e.db.Pool)
	require.NoError(t, err)
	svc := grpcapi.NewIdempotentPayments(grpcapi.NewPayments(example.NewPayments(e.db.Pool, &example.Bank{BaseURL: bank.URL})), store)

	gs := grpcapi.NewGRPCServer(svc, grpc.ChainUnaryInterceptor(e.serverCalls.count))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = gs.Serve(ln) }()
	t.Cleanup(gs.Stop)
	e.grpcAddr = ln.Addr().String()

	mux := http.NewServeMux()
	mux.Handle(grpcapi.NewConnectHandler(svc, connect.WithInterceptors(e.connectCalls.connect())))
	hs := httptest.NewUnstartedServer(mux)
	hs.Config.Protocols = new(http.Protocols)
	hs.Config.Protocols.SetHTTP1(true)
	hs.Config.Protocols.SetUnencryptedHTTP2(true)
	hs.Start()
	t.Cleanup(hs.Close)
	e.connectURL = hs.URL
	return e
}

// h2c is an HTTP client that speaks HTTP/2 without TLS only.
func h2c() *http.Client {
	tr := &http.Transport{Protocols: new(http.Protocols), MaxIdleConnsPerHost: 16}
	tr.Protocols.SetUnencryptedHTTP2(true)
	return &http.Client{Transport: tr}
}

// lossyProxy forwards TCP connections to target. After a connection's first
// chunk from the server (the HTTP/2 settings), it loses each further chunk
// with probability loss: it resets both sides instead of passing it on, so
// every call in flight on the connection, whose request the server has
// received and may have carried out, loses its answer.
type lossyProxy struct {
	ln     net.Listener
	target string
	loss   float64
	conns  atomic.Int64
	cuts   atomic.Int64
}

func startProxy(t *testing.T, target string, loss float64) *lossyProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &lossyProxy{ln: ln, target: target, loss: loss}
	go p.serve()
	t.Cleanup(func() { _ = ln.Close() })
	return p
}

func (p *lossyProxy) addr() string { return p.ln.Addr().String() }

func (p *lossyProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.conns.Add(1)
		go p.pipe(c)
	}
}

func (p *lossyProxy) pipe(client net.Conn) {
	server, err := net.Dial("tcp", p.target)
	if err != nil {
		_ = client.Close()
		return
	}
	go func() {
		_, _ = io.Copy(server, client)
		_ = server.Close()
	}()
	buf := make([]byte, 64<<10)
	for first := true; ; first = false {
		n, err := server.Read(buf)
		if n > 0 && !first && rand.Float64() < p.loss {
			p.cuts.Add(1)
			reset(client)
			reset(server)
			return
		}
		if n > 0 {
			if _, werr := client.Write(buf[:n]); werr != nil {
				err = werr
			}
		}
		if err != nil {
			_ = client.Close()
			_ = server.Close()
			return
		}
	}
}

// reset closes c with a TCP RST instead of a FIN.
func reset(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = c.Close()
}

// deadline is the bound of each call of the lossy runs: generous, so a slow
// machine only makes the run slower; it is not a timing assertion.
const deadline = 2 * time.Minute
