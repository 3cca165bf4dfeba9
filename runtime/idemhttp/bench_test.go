package idemhttp_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/idemhttp"
)

func BenchmarkParseKey(b *testing.B) {
	for name, v := range map[string]string{
		"bare":      "8e03978e-40d5-43e8-bc93-6894a57f9324",
		"sf-string": `"8e03978e-40d5-43e8-bc93-6894a57f9324"`,
	} {
		b.Run(name, func(b *testing.B) {
			values := []string{v}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := idemhttp.ParseKey(values, idem.DefaultKeyPolicy); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkMiddleware measures what the middleware adds to a request that
// carries a key: parsing, scope, context values and the response wrapper.
func BenchmarkMiddleware(b *testing.B) {
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusCreated) })
	for name, h := range map[string]http.Handler{
		"bare handler": ok,
		"with middleware": idemhttp.New(idemhttp.Config{
			Scope: func(*http.Request) (string, error) { return "acct_1", nil },
		})(ok),
	} {
		b.Run(name, func(b *testing.B) {
			r := httptest.NewRequest(http.MethodPost, "/charges", nil)
			r.Header.Set(idemhttp.HeaderKey, `"8e03978e-40d5-43e8-bc93-6894a57f9324"`)
			b.ReportAllocs()
			for b.Loop() {
				w := httptest.NewRecorder()
				h.ServeHTTP(w, r)
				if w.Code != http.StatusCreated {
					b.Fatal(w.Code)
				}
			}
		})
	}
}
