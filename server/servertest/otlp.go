package servertest

import (
	"compress/gzip"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// OTLPSpan is one span an OTLPReceiver got, flattened: ids in hex,
// attributes as strings (integers in decimal).
type OTLPSpan struct {
	Service, Name     string
	Trace, ID, Parent string
	Kind              tracepb.Span_SpanKind
	Attrs             map[string]string
	Links             []string // the linked spans' ids
	LinkTraces        []string // and their traces'
	Events            []string
	Status            tracepb.Status_StatusCode
	// Start is the span's start; Started its run.started event's time (0
	// without one), in Unix nanoseconds.
	Start, Started uint64
}

// OTLPReceiver is an OTLP/HTTP traces endpoint as a collector serves it
// (POST /v1/traces, a protobuf ExportTraceServiceRequest, decoded with
// the official OTLP types): point OTEL_EXPORTER_OTLP_ENDPOINT at its URL.
type OTLPReceiver struct {
	*httptest.Server
	mu    sync.Mutex
	spans []OTLPSpan
	posts int
}

// NewOTLPReceiver starts a receiver, closed when the test ends. An export
// it cannot decode fails the test.
func NewOTLPReceiver(t testing.TB) *OTLPReceiver {
	t.Helper()
	rc := &OTLPReceiver{}
	rc.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/v1/traces" {
			http.Error(w, "not an OTLP traces request", http.StatusNotFound)
			return
		}
		var body io.Reader = r.Body
		if r.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			body = zr
		}
		raw, err := io.ReadAll(body)
		var req coltracepb.ExportTraceServiceRequest
		if err == nil {
			err = proto.Unmarshal(raw, &req)
		}
		if err != nil || r.Header.Get("Content-Type") != "application/x-protobuf" {
			t.Errorf("OTLP receiver: undecodable export (%s): %v", r.Header.Get("Content-Type"), err)
			http.Error(w, "bad export", http.StatusBadRequest)
			return
		}
		rc.add(&req)
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(out)
	}))
	t.Cleanup(rc.Close)
	return rc
}

func (rc *OTLPReceiver) add(req *coltracepb.ExportTraceServiceRequest) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.posts++
	for _, rs := range req.ResourceSpans {
		service := ""
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.Key == "service.name" {
				service = kv.GetValue().GetStringValue()
			}
		}
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				sp := OTLPSpan{Service: service, Name: s.Name, Trace: hex.EncodeToString(s.TraceId),
					ID: hex.EncodeToString(s.SpanId), Parent: hex.EncodeToString(s.ParentSpanId), Kind: s.Kind,
					Attrs: map[string]string{}, Status: s.GetStatus().GetCode(), Start: s.StartTimeUnixNano}
				for _, kv := range s.Attributes {
					switch v := kv.GetValue().Value.(type) {
					case *commonpb.AnyValue_StringValue:
						sp.Attrs[kv.Key] = v.StringValue
					case *commonpb.AnyValue_IntValue:
						sp.Attrs[kv.Key] = strconv.FormatInt(v.IntValue, 10)
					default:
						sp.Attrs[kv.Key] = kv.GetValue().String()
					}
				}
				for _, l := range s.Links {
					sp.Links = append(sp.Links, hex.EncodeToString(l.SpanId))
					sp.LinkTraces = append(sp.LinkTraces, hex.EncodeToString(l.TraceId))
				}
				for _, e := range s.Events {
					sp.Events = append(sp.Events, e.Name)
					if e.Name == "run.started" {
						sp.Started = e.TimeUnixNano
					}
				}
				rc.spans = append(rc.spans, sp)
			}
		}
	}
}

// Spans returns the spans received so far and how many exports brought
// them.
func (rc *OTLPReceiver) Spans() ([]OTLPSpan, int) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]OTLPSpan(nil), rc.spans...), rc.posts
}

// FindSpans returns the spans named name whose attributes include want.
func FindSpans(spans []OTLPSpan, name string, want map[string]string) []OTLPSpan {
	var out []OTLPSpan
next:
	for _, s := range spans {
		if s.Name != name {
			continue
		}
		for k, v := range want {
			if s.Attrs[k] != v {
				continue next
			}
		}
		out = append(out, s)
	}
	return out
}

// OneSpan is FindSpans that fails the test unless exactly one span matches.
func OneSpan(t testing.TB, spans []OTLPSpan, name string, want map[string]string) OTLPSpan {
	t.Helper()
	got := FindSpans(spans, name, want)
	if len(got) != 1 {
		var names []string
		for _, s := range spans {
			names = append(names, s.Service+":"+s.Name)
		}
		t.Fatalf("want one span %q with %v, got %d; all spans: %v", name, want, len(got), names)
	}
	return got[0]
}
