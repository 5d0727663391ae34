package agentapi

import (
	"errors"
	"testing"

	"slipway/server/httpx"
)

// FuzzDecodeRunCreate: any body either decodes to a run request with an
// assistant and at least one stream mode, or fails with a client error.
func FuzzDecodeRunCreate(f *testing.F) {
	f.Add([]byte(`{"assistant_id":"echo","input":{"messages":[{"role":"user","content":"hi"}]},"multitask_strategy":"reject"}`))
	f.Add([]byte(`{"assistant_id":"echo","stream_mode":"values"}`))
	f.Add([]byte(`{"assistant_id":"echo","stream_mode":["updates",1]}`))
	f.Add([]byte(`{`))
	f.Add([]byte(``))
	f.Fuzz(func(t *testing.T, body []byte) {
		rc, err := DecodeRunCreate(body)
		if err != nil {
			var he *httpx.Error
			var ve *httpx.ValidationError
			if !errors.As(err, &he) && !errors.As(err, &ve) {
				t.Fatalf("non-client error %T: %v", err, err)
			}
			return
		}
		if rc.AssistantID == "" || len(rc.StreamMode) == 0 {
			t.Fatalf("accepted incomplete request %+v", rc)
		}
	})
}
