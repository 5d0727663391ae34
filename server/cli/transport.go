package cli

import (
	"errors"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
)

// Every request the client makes carries a credential: the API key, or
// the token of a pre-signed upload URL. Over plain http:// anyone on the
// path can read it, so the client refuses to send one there unless the
// host is this machine (loopback) or the user said --insecure
// (SLIPWAY_INSECURE=1). The check is in the transport, under every
// request the client makes (JSON calls, log streams, uploads) and every
// redirect it follows, so no command and no server answer can route a key
// around it.

// guardTransport refuses plain-http requests to other hosts unless insecure.
type guardTransport struct {
	base     http.RoundTripper
	insecure bool
}

func (g *guardTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if err := checkTransport(req.URL, g.insecure); err != nil {
		if req.Header.Get("X-Api-Key") == "" {
			err.what = "the upload URL's signed token"
		}
		// A RoundTripper must close the body it is handed, even on error.
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, err
	}
	return g.base.RoundTrip(req)
}

// checkTransport says whether a request to u may be sent: https, or plain
// http to a loopback host, or anything with insecure.
func checkTransport(u *url.URL, insecure bool) *insecureError {
	if insecure || !strings.EqualFold(u.Scheme, "http") || loopback(u.Hostname()) {
		return nil
	}
	return &insecureError{what: "the API key", url: (&url.URL{Scheme: u.Scheme, Host: u.Host}).String()}
}

// loopback reports whether host names this machine: localhost, an address
// in 127.0.0.0/8, or ::1 (also written as an IPv4-mapped address). Other
// names are not resolved: what a name resolves to is up to the network the
// key would cross.
func loopback(host string) bool {
	if strings.EqualFold(strings.TrimSuffix(host, "."), "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Zone() == "" && ip.Unmap().IsLoopback()
}

// insecureError is the refusal: it says why, and how to go on.
type insecureError struct{ what, url string }

func (e *insecureError) Error() string {
	return "refusing to send " + e.what + " to " + e.url + " over plain http: anyone on the network between here and " +
		"there could read it. Use an https:// URL (Slipway behind a TLS-terminating proxy), or pass --insecure " +
		"(or set SLIPWAY_INSECURE=1) if that network is trusted"
}

// asInsecure returns the refusal inside a transport error, if that is what it is.
func asInsecure(err error) (*insecureError, bool) {
	var ie *insecureError
	ok := errors.As(err, &ie)
	return ie, ok
}
