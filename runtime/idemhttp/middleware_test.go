package idemhttp_test

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/idemhttp"
)

// seen is what the innermost handler found in its request.
type seen struct {
	called   bool
	key      string
	hasKey   bool
	scope    string
	pathID   string
	response http.ResponseWriter
}

// recordingHandler records the request's key and scope and answers 201.
func recordingHandler(s *seen) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.called = true
		s.key, s.hasKey = idem.KeyFrom(r.Context())
		s.scope = idem.ScopeFrom(r.Context())
		s.pathID = r.PathValue("id")
		s.response = w
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, "created")
	})
}

// serve runs one request through h and returns the recorded response.
func serve(h http.Handler, method, target string, header http.Header) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, target, strings.NewReader(`{"amount":100}`))
	for k, vs := range header {
		for _, v := range vs {
			r.Header.Add(k, v)
		}
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func keyHeader(values ...string) http.Header {
	h := http.Header{}
	for _, v := range values {
		h.Add(idemhttp.HeaderKey, v)
	}
	return h
}

// decodeProblem checks the problem+json framing and returns the body.
func decodeProblem(t *testing.T, w *httptest.ResponseRecorder) idemhttp.Problem {
	t.Helper()
	assert.Equal(t, idemhttp.ContentTypeProblem, w.Header().Get("Content-Type"))
	assert.Equal(t, "no-store", w.Header().Get("Cache-Control"))
	var p idemhttp.Problem
	dec := json.NewDecoder(w.Body)
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(&p), "body is a problem details object")
	assert.Equal(t, w.Code, p.Status, "status member matches the response status")
	assert.NotEmpty(t, p.Title)
	assert.NotEmpty(t, p.Detail)
	return p
}

func TestMiddlewareAcceptsKey(t *testing.T) {
	tests := []struct {
		name   string
		header http.Header
		want   string
	}{
		{"bare", keyHeader("8e03978e-40d5-43e8-bc93-6894a57f9324"), "8e03978e-40d5-43e8-bc93-6894a57f9324"},
		{"sf-string", keyHeader(`"8e03978e-40d5-43e8-bc93-6894a57f9324"`), "8e03978e-40d5-43e8-bc93-6894a57f9324"},
		{"sf-string with escapes", keyHeader(`"order-\"7\"\\a"`), `order-"7"\a`},
		{"whitespace around", keyHeader("  abc\t"), "abc"},
		{"lower-case header name", http.Header{"idempotency-key": {"abc"}}, "abc"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var s seen
			h := idemhttp.New(idemhttp.Config{SingleTenant: true})(recordingHandler(&s))
			r := httptest.NewRequest(http.MethodPost, "/charges", nil)
			for k, vs := range tt.header {
				for _, v := range vs {
					r.Header.Add(k, v) // Add canonicalises the name, as the server does
				}
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			require.Equal(t, http.StatusCreated, w.Code, w.Body.String())
			require.True(t, s.called)
			assert.True(t, s.hasKey)
			assert.Equal(t, tt.want, s.key)
			assert.Empty(t, s.scope, "no scope function, no scope")
			assert.Empty(t, w.Header().Values(idemhttp.HeaderReplayed), "not a replay")
			assert.Empty(t, w.Header().Values(idemhttp.HeaderRetention), "no idempotent call was made")
			assert.Equal(t, "created", w.Body.String())
		})
	}
}

func TestMiddlewareRefusesBadKeys(t *testing.T) {
	tests := []struct {
		name     string
		header   http.Header
		wantType string
		detail   string // substring of the detail
		secret   string // must not appear in the body
	}{
		{name: "missing", header: http.Header{}, wantType: idemhttp.TypeMissingKey, detail: "requires an Idempotency-Key header"},
		{name: "empty", header: keyHeader(""), wantType: idemhttp.TypeInvalidKey, detail: "malformed: empty"},
		{name: "empty sf-string", header: keyHeader(`""`), wantType: idemhttp.TypeInvalidKey, detail: "malformed: empty"},
		{name: "two headers", header: keyHeader("abc", "abd"), wantType: idemhttp.TypeInvalidKey, detail: "sent 2 times", secret: "abd"},
		{name: "too long", header: keyHeader(strings.Repeat("z", 256)), wantType: idemhttp.TypeInvalidKey, detail: "256 bytes, longer than 255", secret: "zzzz"},
		{name: "far too long", header: keyHeader(strings.Repeat("z", 100_000)), wantType: idemhttp.TypeInvalidKey, detail: "100000 bytes", secret: "zzzz"},
		{name: "control characters", header: keyHeader("ab\x1b[2J\x07"), wantType: idemhttp.TypeInvalidKey, detail: "byte 3 (0x1b)", secret: "\x1b"},
		{name: "newline escape in sf-string", header: keyHeader(`"a\nb"`), wantType: idemhttp.TypeInvalidKey, detail: "follows a backslash", secret: `a\nb`},
		{name: "unterminated sf-string", header: keyHeader(`"<script>alert(1)</script>`), wantType: idemhttp.TypeInvalidKey, detail: "no closing quote", secret: "script"},
		{name: "non-ascii", header: keyHeader("clé"), wantType: idemhttp.TypeInvalidKey, detail: "byte 3 (0xc3)", secret: "cl"},
		{name: "inner whitespace", header: keyHeader("a b"), wantType: idemhttp.TypeInvalidKey, detail: "byte 2 (0x20)"},
		{name: "sf parameters", header: keyHeader(`"abc";x=1`), wantType: idemhttp.TypeInvalidKey, detail: "parameters are not supported", secret: "x=1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var s seen
			h := idemhttp.New(idemhttp.Config{SingleTenant: true})(recordingHandler(&s))
			w := serve(h, http.MethodPost, "/charges", tt.header)
			assert.False(t, s.called, "the handler must not run")
			require.Equal(t, http.StatusBadRequest, w.Code)
			raw := w.Body.String()
			assertPrintable(t, strings.TrimSuffix(raw, "\n"))
			if tt.secret != "" {
				assert.NotContains(t, raw, tt.secret, "the header is not reflected")
			}
			p := decodeProblem(t, w)
			assert.Equal(t, tt.wantType, p.Type)
			assert.Contains(t, p.Detail, tt.detail)
			assert.Equal(t, "/charges", p.Instance)
		})
	}
}

func TestMiddlewarePassThroughMethods(t *testing.T) {
	scopeCalls := 0
	mw := idemhttp.New(idemhttp.Config{Scope: func(*http.Request) (string, error) {
		scopeCalls++
		return "acct", nil
	}})
	for _, method := range []string{http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodPut, http.MethodDelete} {
		for name, header := range map[string]http.Header{
			"no key":        {},
			"valid key":     keyHeader("abc"),
			"malformed key": keyHeader(`"abc`),
		} {
			t.Run(method+"/"+name, func(t *testing.T) {
				var s seen
				w := serve(mw(recordingHandler(&s)), method, "/charges", header)
				require.True(t, s.called)
				assert.Equal(t, http.StatusCreated, w.Code)
				assert.False(t, s.hasKey, "no key is read")
				assert.Empty(t, s.scope)
				_, wrapped := s.response.(*httptest.ResponseRecorder)
				assert.True(t, wrapped, "the ResponseWriter is not wrapped")
				assert.Empty(t, w.Header().Values(idemhttp.HeaderReplayed))
			})
		}
	}
	assert.Zero(t, scopeCalls, "the scope function is not called for pass-through methods")
}

func TestMiddlewareRequiredMethods(t *testing.T) {
	t.Run("default POST and PATCH", func(t *testing.T) {
		mw := idemhttp.New(idemhttp.Config{SingleTenant: true})
		for _, method := range []string{http.MethodPost, http.MethodPatch} {
			var s seen
			w := serve(mw(recordingHandler(&s)), method, "/x", nil)
			assert.Equal(t, http.StatusBadRequest, w.Code, method)
			assert.False(t, s.called, method)
		}
	})
	t.Run("configured", func(t *testing.T) {
		mw := idemhttp.New(idemhttp.Config{SingleTenant: true, Methods: []string{http.MethodPut, http.MethodPost}})
		for method, want := range map[string]int{
			http.MethodPut:   http.StatusBadRequest,
			http.MethodPost:  http.StatusBadRequest,
			http.MethodPatch: http.StatusCreated,
			"post":           http.StatusCreated, // methods are case-sensitive
		} {
			var s seen
			w := serve(mw(recordingHandler(&s)), method, "/x", nil)
			assert.Equal(t, want, w.Code, method)
		}
	})
	t.Run("empty list requires none", func(t *testing.T) {
		mw := idemhttp.New(idemhttp.Config{SingleTenant: true, Methods: []string{}})
		var s seen
		w := serve(mw(recordingHandler(&s)), http.MethodPost, "/x", nil)
		assert.Equal(t, http.StatusCreated, w.Code)
	})
}

func TestMiddlewarePolicy(t *testing.T) {
	mw := idemhttp.New(idemhttp.Config{SingleTenant: true, Policy: idem.KeyPolicy{MinLen: 16, MaxLen: 36}})
	var s seen
	w := serve(mw(recordingHandler(&s)), http.MethodPost, "/x", keyHeader("short"))
	require.Equal(t, http.StatusBadRequest, w.Code)
	assert.Contains(t, decodeProblem(t, w).Detail, "shorter than 16 bytes")

	w = serve(mw(recordingHandler(&s)), http.MethodPost, "/x", keyHeader(strings.Repeat("a", 37)))
	require.Equal(t, http.StatusBadRequest, w.Code)
	assert.Contains(t, decodeProblem(t, w).Detail, "37 bytes, longer than 36")

	w = serve(mw(recordingHandler(&s)), http.MethodPost, "/x", keyHeader("8e03978e-40d5-43e8-bc93-6894a57f9324"))
	assert.Equal(t, http.StatusCreated, w.Code)
}

func TestMiddlewareScope(t *testing.T) {
	accountOf := func(r *http.Request) (string, error) {
		switch r.Header.Get("Authorization") {
		case "Bearer alice":
			return "acct_alice", nil
		case "Bearer nobody":
			return "", nil
		default:
			return "", errors.New("token unknown: db lookup failed at 10.0.0.7")
		}
	}

	t.Run("applied", func(t *testing.T) {
		var s seen
		h := idemhttp.New(idemhttp.Config{Scope: accountOf})(recordingHandler(&s))
		w := serve(h, http.MethodPost, "/charges", http.Header{"Authorization": {"Bearer alice"}, idemhttp.HeaderKey: {"k1"}})
		require.Equal(t, http.StatusCreated, w.Code)
		assert.Equal(t, "acct_alice", s.scope)
		assert.Equal(t, "k1", s.key)
	})
	for name, auth := range map[string]string{"error": "Bearer mallory", "empty scope": "Bearer nobody"} {
		t.Run(name, func(t *testing.T) {
			var s seen
			h := idemhttp.New(idemhttp.Config{Scope: accountOf})(recordingHandler(&s))
			w := serve(h, http.MethodPost, "/charges", http.Header{"Authorization": {auth}, idemhttp.HeaderKey: {"k1"}})
			assert.False(t, s.called)
			require.Equal(t, http.StatusForbidden, w.Code)
			assert.NotContains(t, w.Body.String(), "10.0.0.7", "the scope error is not shown to the client")
			p := decodeProblem(t, w)
			assert.Equal(t, idemhttp.TypeScopeUnknown, p.Type)
		})
	}
	t.Run("checked before the key", func(t *testing.T) {
		var s seen
		h := idemhttp.New(idemhttp.Config{Scope: accountOf})(recordingHandler(&s))
		w := serve(h, http.MethodPost, "/charges", http.Header{"Authorization": {"Bearer mallory"}})
		assert.Equal(t, http.StatusForbidden, w.Code)
	})
	t.Run("OnScopeError", func(t *testing.T) {
		var got []error
		h := idemhttp.New(idemhttp.Config{
			Scope: accountOf,
			OnScopeError: func(w http.ResponseWriter, r *http.Request, err error) {
				got = append(got, err)
				w.Header().Set("WWW-Authenticate", `Bearer realm="payments"`)
				w.WriteHeader(http.StatusUnauthorized)
			},
		})(recordingHandler(&seen{}))
		w := serve(h, http.MethodPost, "/charges", http.Header{"Authorization": {"Bearer mallory"}, idemhttp.HeaderKey: {"k1"}})
		assert.Equal(t, http.StatusUnauthorized, w.Code)
		w = serve(h, http.MethodPost, "/charges", http.Header{"Authorization": {"Bearer nobody"}, idemhttp.HeaderKey: {"k1"}})
		assert.Equal(t, http.StatusUnauthorized, w.Code)
		require.Len(t, got, 2)
		assert.ErrorContains(t, got[0], "token unknown")
		assert.ErrorIs(t, got[1], idemhttp.ErrEmptyScope)
	})
}

func TestServeMuxPatterns(t *testing.T) {
	mw := idemhttp.New(idemhttp.Config{SingleTenant: true})
	t.Run("per route", func(t *testing.T) {
		var post, get, refund seen
		mux := http.NewServeMux()
		mux.Handle("POST /charges", mw(recordingHandler(&post)))
		mux.Handle("GET /charges/{id}", recordingHandler(&get))
		mux.Handle("POST /charges/{id}/refunds", mw(recordingHandler(&refund)))

		w := serve(mux, http.MethodPost, "/charges", nil)
		assert.Equal(t, http.StatusBadRequest, w.Code)
		assert.Equal(t, idemhttp.TypeMissingKey, decodeProblem(t, w).Type)

		w = serve(mux, http.MethodPost, "/charges", keyHeader("c-1"))
		assert.Equal(t, http.StatusCreated, w.Code)
		assert.Equal(t, "c-1", post.key)

		w = serve(mux, http.MethodGet, "/charges/ch_1", nil)
		assert.Equal(t, http.StatusCreated, w.Code)
		assert.Equal(t, "ch_1", get.pathID)

		w = serve(mux, http.MethodPost, "/charges/ch_9/refunds", keyHeader(`"r-1"`))
		assert.Equal(t, http.StatusCreated, w.Code)
		assert.Equal(t, "r-1", refund.key)
		assert.Equal(t, "ch_9", refund.pathID, "path values survive the middleware")

		w = serve(mux, http.MethodDelete, "/charges", keyHeader("c-1"))
		assert.Equal(t, http.StatusMethodNotAllowed, w.Code, "the mux still answers 405")
	})
	t.Run("whole mux", func(t *testing.T) {
		var post, get seen
		mux := http.NewServeMux()
		mux.Handle("POST /charges/{id}/capture", recordingHandler(&post))
		mux.Handle("GET /charges/{id}", recordingHandler(&get))
		h := mw(mux)

		w := serve(h, http.MethodPost, "/charges/ch_2/capture", keyHeader("cap-1"))
		assert.Equal(t, http.StatusCreated, w.Code)
		assert.Equal(t, "cap-1", post.key)
		assert.Equal(t, "ch_2", post.pathID)

		w = serve(h, http.MethodPost, "/charges/ch_2/capture", nil)
		assert.Equal(t, http.StatusBadRequest, w.Code)

		w = serve(h, http.MethodGet, "/charges/ch_2", nil)
		assert.Equal(t, http.StatusCreated, w.Code)
		assert.False(t, get.hasKey)
	})
}

// TestChainedMiddleware wraps the middleware the way chi (r.Use) and echo
// (echo.WrapMiddleware) do: as a func(http.Handler) http.Handler in a chain.
func TestChainedMiddleware(t *testing.T) {
	chain := func(h http.Handler, mws ...func(http.Handler) http.Handler) http.Handler {
		for i := len(mws) - 1; i >= 0; i-- {
			h = mws[i](h)
		}
		return h
	}
	auth := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			r.Header.Set("X-Account", strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "))
			next.ServeHTTP(w, r)
		})
	}
	var s seen
	h := chain(recordingHandler(&s), auth, idemhttp.New(idemhttp.Config{
		Scope: func(r *http.Request) (string, error) { return r.Header.Get("X-Account"), nil },
	}))
	w := serve(h, http.MethodPost, "/charges", http.Header{"Authorization": {"Bearer bob"}, idemhttp.HeaderKey: {"k"}})
	require.Equal(t, http.StatusCreated, w.Code)
	assert.Equal(t, "bob", s.scope)
	assert.Equal(t, "k", s.key)
}

// TestResponseController checks that a handler behind the middleware can
// still flush and reach the connection through http.ResponseController, on a
// real server.
func TestResponseController(t *testing.T) {
	h := idemhttp.New(idemhttp.Config{SingleTenant: true})(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		_, _ = io.WriteString(w, "first\n")
		if err := rc.Flush(); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.(http.Flusher).Flush()
		if err := rc.EnableFullDuplex(); err != nil {
			_, _ = io.WriteString(w, "no full duplex: "+err.Error())
			return
		}
		_, _ = io.WriteString(w, "second\n")
	}))
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)

	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL+"/stream", strings.NewReader("{}"))
	require.NoError(t, err)
	req.Header.Set(idemhttp.HeaderKey, `"k-stream"`)
	resp, err := srv.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, "first\nsecond\n", string(body))
	assert.Empty(t, resp.Header.Values(idemhttp.HeaderReplayed))
	assert.Equal(t, []string{"chunked"}, resp.TransferEncoding, "the flush reached the connection")
}

// TestProblemTypeBase: a service's own base replaces the default one in the
// problems the middleware writes and in those WriteError writes for requests
// that went through it; without it the Type constants are written.
func TestProblemTypeBase(t *testing.T) {
	const base = "https://errors.example.com/idempotency#"
	mismatch := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		require.True(t, idemhttp.WriteError(w, r, &idem.MismatchError{Method: "Payments.Charge", Key: "k"}))
	})
	scopeFails := func(*http.Request) (string, error) { return "", errors.New("no account") }
	tests := []struct {
		name   string
		cfg    idemhttp.Config
		header http.Header
		want   string
	}{
		{"missing key", idemhttp.Config{SingleTenant: true, ProblemTypeBase: base}, http.Header{}, base + "missing-key"},
		{"invalid key", idemhttp.Config{SingleTenant: true, ProblemTypeBase: base}, keyHeader("a b"), base + "invalid-key"},
		{"scope", idemhttp.Config{Scope: scopeFails, ProblemTypeBase: base}, keyHeader("k"), base + "scope-unknown"},
		{"WriteError", idemhttp.Config{SingleTenant: true, ProblemTypeBase: base}, keyHeader("k"), base + "mismatch"},
		{"default", idemhttp.Config{SingleTenant: true}, keyHeader("k"), idemhttp.TypeMismatch},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := serve(idemhttp.New(tt.cfg)(mismatch), http.MethodPost, "/charges", tt.header)
			assert.Equal(t, tt.want, decodeProblem(t, w).Type)
		})
	}
	assert.Panics(t, func() { idemhttp.New(idemhttp.Config{SingleTenant: true, ProblemTypeBase: "http://[::1"}) })
}
