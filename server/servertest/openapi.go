package servertest

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"
	"github.com/pb33f/libopenapi-validator/config"
	verrors "github.com/pb33f/libopenapi-validator/errors"
	"github.com/pb33f/libopenapi-validator/helpers"
)

// Every exchange of Do with a server or agent started here is checked
// against the OpenAPI document that process serves: the response always,
// the request when the server accepted it (2xx), since a request the
// server took must be one the document allows. Tests that send invalid
// requests on purpose stay valid: only the server's answer is checked.
// SLIPWAY_TEST_OPENAPI=off turns the checks off (to bisect a failure);
// benchmarks are never checked.

type docCheck struct {
	once sync.Once
	doc  *docValidator // shared by every server serving the same document
	err  error
}

// docValidator is the validator of one document. Building it takes a
// good part of a second, longer than starting an in-process server, so
// the servers of a test binary, which serve the same document, share it.
type docValidator struct {
	once sync.Once
	v    validator.Validator
	err  error
	mu   sync.Mutex // the validator's caches are not meant for parallel use
}

var (
	checksMu   sync.Mutex
	checks     = map[string]*docCheck{}       // base URL → its document's validator
	validators = map[[32]byte]*docValidator{} // the document's SHA-256 → its validator
)

// checkAPI registers base (a server's URL) for validation with the
// document it serves at docPath.
func checkAPI(base string) {
	checksMu.Lock()
	defer checksMu.Unlock()
	checks[base] = &docCheck{}
}

func (c *docCheck) load(base string) {
	c.once.Do(func() {
		resp, err := http.Get(base + "/openapi.json")
		if err != nil {
			c.err = err
			return
		}
		defer resp.Body.Close()
		spec, err := io.ReadAll(resp.Body)
		if err != nil {
			c.err = err
			return
		}
		if resp.StatusCode != 200 {
			c.err = fmt.Errorf("GET /openapi.json: %d %s", resp.StatusCode, spec)
			return
		}
		sum := sha256.Sum256(spec)
		checksMu.Lock()
		d := validators[sum]
		if d == nil {
			d = &docValidator{}
			validators[sum] = d
		}
		checksMu.Unlock()
		d.build(spec)
		c.doc, c.err = d, d.err
	})
}

func (d *docValidator) build(spec []byte) {
	d.once.Do(func() {
		doc, err := libopenapi.NewDocument(spec)
		if err != nil {
			d.err = fmt.Errorf("parsing the served document: %w", err)
			return
		}
		v, errs := validator.NewValidator(doc, config.WithFormatAssertions(), config.WithoutSecurityValidation())
		if len(errs) > 0 {
			d.err = fmt.Errorf("the served document: %v", errs)
			return
		}
		d.v = v
	})
}

// CheckExchange validates one exchange with a process started by this
// package against the document it serves; it does nothing for other URLs.
func CheckExchange(t testing.TB, method, rawURL string, reqHeader http.Header, reqBody []byte, status int, respHeader http.Header, respBody []byte) {
	t.Helper()
	if os.Getenv("SLIPWAY_TEST_OPENAPI") == "off" {
		return
	}
	// Benchmarks measure the server, not the check (which would also
	// serialize their parallel clients on the validator's lock).
	if _, isB := t.(*testing.B); isB {
		return
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return
	}
	base := u.Scheme + "://" + u.Host
	checksMu.Lock()
	c := checks[base]
	checksMu.Unlock()
	if c == nil {
		return
	}
	// Proxied calls answer with the agent's own API (checked by the agent
	// suites); /api-host is the same API under the hosted prefix.
	path := strings.TrimPrefix(u.Path, "/api-host")
	if strings.HasPrefix(path, "/agents/") {
		return
	}
	c.load(base)
	if c.err != nil {
		t.Errorf("openapi check of %s %s: %v", method, rawURL, c.err)
		return
	}
	u2 := *u
	u2.Path = path
	mkReq := func() *http.Request {
		req, _ := http.NewRequest(method, u2.String(), bytes.NewReader(reqBody))
		req.Header = reqHeader.Clone()
		if req.Header.Get("Content-Type") == "" {
			req.Header.Set("Content-Type", "application/json")
		}
		return req
	}
	resp := &http.Response{StatusCode: status, Header: respHeader.Clone(), Body: io.NopCloser(bytes.NewReader(respBody)), Request: mkReq()}
	c.doc.mu.Lock()
	defer c.doc.mu.Unlock()
	var problems []*verrors.ValidationError
	if ok, errs := c.doc.v.ValidateHttpResponse(mkReq(), resp); !ok {
		problems = append(problems, errs...)
	}
	if status/100 == 2 {
		if ok, errs := c.doc.v.ValidateHttpRequest(mkReq()); !ok {
			problems = append(problems, errs...)
		}
	}
	problems = relevant(problems, status)
	if len(problems) == 0 {
		return
	}
	var b strings.Builder
	for _, p := range problems {
		fmt.Fprintf(&b, "\n  - %s", p.Message)
		if p.Reason != "" {
			fmt.Fprintf(&b, ": %s", p.Reason)
		}
		for _, sv := range p.SchemaValidationErrors {
			fmt.Fprintf(&b, "\n      %s: %s", sv.FieldPath, sv.Reason)
		}
	}
	body := respBody
	if len(body) > 600 {
		body = body[:600]
	}
	t.Errorf("%s %s → %d does not match the OpenAPI document:%s\n  request: %.400s\n  response: %s", method, rawURL, status, b.String(), reqBody, body)
}

// relevant drops what is not a mismatch: a route the document does not
// have is fine when the server answered it 404 or 405 too.
func relevant(errs []*verrors.ValidationError, status int) []*verrors.ValidationError {
	var out []*verrors.ValidationError
	for _, e := range errs {
		if e.ValidationType == helpers.PathValidation && (status == 404 || status == 405) {
			continue
		}
		// The validator's JSON decoder stops at a nesting depth the
		// server accepts (tests store such documents on purpose): that
		// body cannot be checked, which is no mismatch.
		if strings.Contains(e.Reason, "exceeded max depth") {
			continue
		}
		out = append(out, e)
	}
	return out
}
