package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/example/cmd/demo/scenario"
	"github.com/idemgen/idemgen/runtime/idemtest"
)

// TestREADMECurl runs every command of docs/http.md's "HTTP API by hand (curl)"
// section, as written, against the example served as demo -serve serves it,
// and checks the answers the README promises. The curl commands are read
// from the README and sent with net/http, so the test needs no curl binary;
// it understands exactly the subset of curl and sh the section uses, and
// fails on anything else.
func TestREADMECurl(t *testing.T) {
	blocks := readmeBlocks(t)
	require.NotEmpty(t, blocks)
	assert.Equal(t, "go run -C example/cmd/demo . -serve", strings.TrimSpace(blocks[0]), "the section starts the server")
	blocks = blocks[1:]

	type want struct {
		status   int
		replayed bool
	}
	// One entry per block, one want per curl command in it (in the order
	// written); again: the README says to run the block a second time, which
	// must replay the same body.
	expect := []struct {
		wants []want
		again bool
	}{
		{[]want{{201, false}}, true},                // charge, quoted key; then the same command again
		{[]want{{201, true}}, false},                // the bare key form replays
		{[]want{{422, false}}, false},               // another amount
		{[]want{{201, false}}, false},               // another account
		{[]want{{400, false}, {400, false}}, false}, // no key; malformed key
		{[]want{{201, false}}, true},                // refund; again
		{[]want{{201, false}, {409, false}}, false}, // payout and its twin
		{[]want{{201, true}}, false},                // the twin, retried
		{[]want{{402, false}}, true},                // declined; again
		{[]want{{201, false}}, true},                // inline deposit; again
	}
	require.Len(t, blocks, len(expect), "the README's curl blocks and this test's expectations")

	db := idemtest.New(t, idemtest.WithoutLedger())
	env, err := scenario.Start(t.Context(), db.URL, scenario.Options{})
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		assert.NoError(t, env.Close(ctx))
	})

	for i, b := range blocks {
		got := runBlock(t, b, "http://"+defaultAddr, env.APIURL)
		require.Len(t, got, len(expect[i].wants), "block %d:\n%s", i+1, b)
		for j, w := range expect[i].wants {
			r := got[j]
			assert.Equal(t, w.status, r.status, "block %d, command %d: status; body %s", i+1, j+1, r.body)
			assert.Equal(t, w.replayed, r.replayed(), "block %d, command %d: Idempotent-Replayed", i+1, j+1)
			if r.status >= 400 {
				assert.Equal(t, "application/problem+json", r.header.Get("Content-Type"), "block %d, command %d", i+1, j+1)
			}
			if r.status == http.StatusConflict {
				assert.NotEmpty(t, r.header.Get("Retry-After"), "block %d, command %d: Retry-After", i+1, j+1)
			}
		}
		if expect[i].again {
			again := runBlock(t, b, "http://"+defaultAddr, env.APIURL)
			require.Len(t, again, 1)
			assert.Equal(t, got[0].status, again[0].status, "block %d again: status", i+1)
			assert.True(t, again[0].replayed(), "block %d again: Idempotent-Replayed", i+1)
			assert.Equal(t, string(got[0].body), string(again[0].body), "block %d again: body", i+1)
		}
	}
	assert.Equal(t, 1, env.Bank.Transfers(), "bank transfers")
}

// readmeBlocks returns the sh code blocks of the curl section of docs/http.md.
func readmeBlocks(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("../../../../../docs/http.md")
	require.NoError(t, err)
	_, sec, ok := strings.Cut(string(b), "\n## HTTP API by hand (curl)\n")
	require.True(t, ok, "docs/http.md has no section \"HTTP API by hand (curl)\"")
	sec, _, _ = strings.Cut(sec, "\n## ")
	var blocks []string
	for _, m := range regexp.MustCompile("(?s)```sh\n(.*?)```").FindAllStringSubmatch(sec, -1) {
		blocks = append(blocks, m[1])
	}
	return blocks
}

// curlResult is the answer to one curl command.
type curlResult struct {
	status int
	header http.Header
	body   []byte
}

func (r curlResult) replayed() bool { return r.header.Get("Idempotent-Replayed") == "true" }

// runBlock runs the commands of one block: curl (optionally in the
// background with &), sleep and wait. URLs starting with readmeBase are sent
// to apiBase. It returns the result of each curl command in written order.
func runBlock(t *testing.T, block, readmeBase, apiBase string) []curlResult {
	t.Helper()
	block = strings.ReplaceAll(block, "\\\n", " ")
	var (
		results []curlResult
		mu      sync.Mutex
		wg      sync.WaitGroup
	)
	for _, line := range strings.Split(block, "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "":
		case line == "wait":
			wg.Wait()
		case strings.HasPrefix(line, "sleep "):
			secs, err := strconv.ParseFloat(strings.TrimPrefix(line, "sleep "), 64)
			require.NoError(t, err, line)
			time.Sleep(time.Duration(secs * float64(time.Second)))
		case strings.HasPrefix(line, "curl "):
			req := parseCurl(t, strings.TrimSuffix(line, "&"), readmeBase, apiBase)
			mu.Lock()
			i := len(results)
			results = append(results, curlResult{})
			mu.Unlock()
			send := func() {
				r := do(t, req)
				mu.Lock()
				results[i] = r
				mu.Unlock()
			}
			if strings.HasSuffix(line, "&") {
				wg.Add(1)
				go func() {
					defer wg.Done()
					send()
				}()
			} else {
				send()
			}
		default:
			t.Fatalf("the README's curl section has a command this test does not understand: %q", line)
		}
	}
	wg.Wait()
	return results
}

// parseCurl turns the curl command line into a request: -i and -s change
// only how curl prints; -H adds a header; -d sends a POST body (as
// application/x-www-form-urlencoded unless a Content-Type header is given,
// as curl does).
func parseCurl(t *testing.T, line, readmeBase, apiBase string) *http.Request {
	t.Helper()
	args := shellWords(t, line)
	require.Equal(t, "curl", args[0])
	var (
		url, data string
		hasData   bool
		header    = http.Header{}
	)
	for i := 1; i < len(args); i++ {
		switch a := args[i]; {
		case a == "-i" || a == "-s":
		case a == "-H" && i+1 < len(args):
			i++
			name, value, ok := strings.Cut(args[i], ":")
			require.True(t, ok, "header %q", args[i])
			header.Add(name, strings.TrimLeft(value, " "))
		case a == "-d" && i+1 < len(args):
			i++
			data, hasData = args[i], true
		case strings.HasPrefix(a, readmeBase+"/"):
			url = apiBase + strings.TrimPrefix(a, readmeBase)
		default:
			t.Fatalf("curl argument %q is not understood by this test (URLs must start with %s)", a, readmeBase)
		}
	}
	require.NotEmpty(t, url, "curl command without a URL: %s", line)
	method := http.MethodGet
	if hasData {
		method = http.MethodPost
		if header.Get("Content-Type") == "" {
			header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
	}
	req, err := http.NewRequest(method, url, strings.NewReader(data))
	require.NoError(t, err)
	req.Header = header
	return req
}

// shellWords splits a command line into words: blanks separate words, and
// single quotes quote (no other shell syntax is used in the section).
func shellWords(t *testing.T, line string) []string {
	t.Helper()
	var (
		words []string
		cur   strings.Builder
		in    bool // a word is being built
	)
	for i := 0; i < len(line); i++ {
		switch c := line[i]; {
		case c == '\'':
			end := strings.IndexByte(line[i+1:], '\'')
			require.GreaterOrEqual(t, end, 0, "unterminated quote in %q", line)
			cur.WriteString(line[i+1 : i+1+end])
			i += end + 1
			in = true
		case c == ' ' || c == '\t':
			if in {
				words = append(words, cur.String())
				cur.Reset()
				in = false
			}
		case c == '"' || c == '\\' || c == '$' || c == '`':
			t.Fatalf("unquoted %q in %q: this test only understands single quotes", c, line)
		default:
			cur.WriteByte(c)
			in = true
		}
	}
	if in {
		words = append(words, cur.String())
	}
	return words
}

// do sends req and reads the whole answer.
func do(t *testing.T, req *http.Request) curlResult {
	resp, err := http.DefaultClient.Do(req.WithContext(t.Context()))
	if err != nil {
		t.Errorf("%s %s: %v", req.Method, req.URL, err)
		return curlResult{header: http.Header{}}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Errorf("%s %s: read body: %v", req.Method, req.URL, err)
	}
	return curlResult{status: resp.StatusCode, header: resp.Header, body: bytes.TrimSpace(body)}
}
