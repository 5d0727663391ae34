package controlplane

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"slipway/server/httpx"
)

// tarGzOf packs files (name → body), in order, as a gzip'd tar.
func tarGzOf(t *testing.T, names ...string) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, n := range names {
		if err := tw.WriteHeader(&tar.Header{Name: n, Typeflag: tar.TypeReg, Mode: 0o644, Size: 2}); err != nil {
			t.Fatal(err)
		}
		_, _ = tw.Write([]byte("{}"))
	}
	if err := errors.Join(tw.Close(), zw.Close()); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestReceiveArchiveRefuses uploads archives the unpacker would refuse for
// their stream or their names: the upload endpoint answers 400 saying why
// (never quoting a name's raw bytes) and stores nothing, where it used to
// accept any archive whose entries parsed.
func TestReceiveArchiveRefuses(t *testing.T) {
	good := tarGzOf(t, "langgraph.json")
	cases := []struct {
		name string
		body []byte
		want string // in the 400's detail; "" stores it
	}{
		{"whole", good, ""},
		{"gzip trailer missing", good[:len(good)-8], "truncated"},
		{"second archive after the first", append(append([]byte(nil), good...), tarGzOf(t, "hidden.py")...), "follows the end of the tar archive"},
		{"escape sequence in a name", tarGzOf(t, "langgraph.json", "src/\x1b]0;owned\x07.py"), `"src/\x1b]0;owned\a.py" has a control character (U+001B`},
		{"invalid UTF-8 in a name", tarGzOf(t, "caf\xe9.py"), "invalid UTF-8"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := &Service{MaxUpload: 1 << 20}
			dst := filepath.Join(t.TempDir(), "uploads", "a.tar.gz")
			_, _, err := s.receiveArchive(bytes.NewReader(tc.body), dst)
			_, statErr := os.Stat(dst)
			if tc.want == "" {
				if err != nil || statErr != nil {
					t.Fatalf("refused: %v (%v)", err, statErr)
				}
				return
			}
			var he *httpx.Error
			if !errors.As(err, &he) || he.Status != http.StatusBadRequest || !strings.Contains(he.Detail, tc.want) {
				t.Fatalf("err %v, want a 400 saying %q", err, tc.want)
			}
			if strings.ContainsAny(he.Detail, "\x1b\x07\xe9") {
				t.Fatalf("the detail quotes raw bytes: %q", he.Detail)
			}
			if statErr == nil {
				t.Fatal("the refused archive was stored")
			}
		})
	}
}
