// Package routers_test runs the idempotency middleware under the common
// routers. It lives in this module so that chi and echo stay out of the
// requirements of github.com/idemgen/idemgen.
package routers_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"
	"github.com/labstack/echo/v4"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/idemhttp"
)

// The middleware is plain func(http.Handler) http.Handler, so the common
// routers take it as it is (chi) or through their adapter (echo).

func routerConfig() idemhttp.Config {
	return idemhttp.Config{Scope: func(r *http.Request) (string, error) { return "acct_1", nil }}
}

// answer writes the key and scope the handler found in its context.
func answer(w http.ResponseWriter, r *http.Request) {
	key, _ := idem.KeyFrom(r.Context())
	w.WriteHeader(http.StatusCreated)
	_, _ = w.Write([]byte(key + "@" + idem.ScopeFrom(r.Context())))
}

func serveRouter(t *testing.T, h http.Handler, key string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, "/charges/42", strings.NewReader("{}"))
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

func TestUnderChi(t *testing.T) {
	r := chi.NewRouter()
	r.Use(idemhttp.New(routerConfig()))
	r.Post("/charges/{id}", func(w http.ResponseWriter, req *http.Request) {
		require.Equal(t, "42", chi.URLParam(req, "id"))
		answer(w, req)
	})
	rec := serveRouter(t, r, `"k-1"`)
	assert.Equal(t, http.StatusCreated, rec.Code)
	assert.Equal(t, "k-1@acct_1", rec.Body.String())
	rec = serveRouter(t, r, "")
	assert.Equal(t, http.StatusBadRequest, rec.Code)
	assert.Equal(t, idemhttp.ContentTypeProblem, rec.Header().Get("Content-Type"))
}

func TestUnderEcho(t *testing.T) {
	e := echo.New()
	e.Use(echo.WrapMiddleware(idemhttp.New(routerConfig())))
	e.POST("/charges/:id", func(c echo.Context) error {
		require.Equal(t, "42", c.Param("id"))
		answer(c.Response(), c.Request())
		return nil
	})
	rec := serveRouter(t, e, "k-2")
	assert.Equal(t, http.StatusCreated, rec.Code)
	assert.Equal(t, "k-2@acct_1", rec.Body.String())
	rec = serveRouter(t, e, `"bad`)
	assert.Equal(t, http.StatusBadRequest, rec.Code)
	assert.Equal(t, idemhttp.ContentTypeProblem, rec.Header().Get("Content-Type"))
}
