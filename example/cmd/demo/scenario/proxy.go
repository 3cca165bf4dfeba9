package scenario

import (
	"bytes"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync"
	"time"
)

// lossyProxy stands for an unreliable network between the client and the
// API. It forwards every request; when told to, it lets the API answer,
// keeps the answer, and drops the client's connection instead of passing the
// answer on, as a timed-out load balancer or a lost mobile connection does.
type lossyProxy struct {
	rp *httputil.ReverseProxy

	mu   sync.Mutex
	lose int      // how many of the next responses to lose
	lost [][]byte // bodies of the responses lost so far
	srv  *http.Server
	url  string
}

// startLossyProxy starts a proxy to target on a free loopback port.
func startLossyProxy(target string) (*lossyProxy, error) {
	u, err := url.Parse(target)
	if err != nil {
		return nil, err
	}
	p := &lossyProxy{rp: httputil.NewSingleHostReverseProxy(u)}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p.srv = &http.Server{Handler: p, ReadHeaderTimeout: 10 * time.Second}
	p.url = "http://" + ln.Addr().String()
	go func() { _ = p.srv.Serve(ln) }()
	return p, nil
}

// loseNext makes the proxy lose the next n responses.
func (p *lossyProxy) loseNext(n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.lose = n
}

// lostBodies returns the bodies of the responses the proxy lost.
func (p *lossyProxy) lostBodies() [][]byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([][]byte(nil), p.lost...)
}

// ServeHTTP forwards r to the API, and either passes the response on or, if
// it is to be lost, records it and drops the client's connection.
func (p *lossyProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	lose := p.lose > 0
	if lose {
		p.lose--
	}
	p.mu.Unlock()
	if !lose {
		p.rp.ServeHTTP(w, r)
		return
	}
	rec := httptest.NewRecorder()
	p.rp.ServeHTTP(rec, r)
	p.mu.Lock()
	p.lost = append(p.lost, bytes.Clone(rec.Body.Bytes()))
	p.mu.Unlock()
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		// Cannot drop the connection: fail the request as a gateway would.
		http.Error(w, "upstream response lost", http.StatusBadGateway)
		return
	}
	_ = conn.Close()
}

// close stops the proxy.
func (p *lossyProxy) close() error { return p.srv.Close() }
