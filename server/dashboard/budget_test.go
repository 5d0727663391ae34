package dashboard

import (
	"bytes"
	"compress/gzip"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"testing"

	"slipway/server/httpx"
)

// assetBudget is what the dashboard may weigh, gzipped: every file a
// browser loads, added up.
const assetBudget = 300 << 10

// TestAssetBudget keeps the embedded dashboard within its budget.
func TestAssetBudget(t *testing.T) {
	total := 0
	err := fs.WalkDir(assets, "assets", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := assets.ReadFile(path)
		if err != nil {
			return err
		}
		var buf bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
		zw.Write(b)
		zw.Close()
		t.Logf("%s: %d bytes, %d gzipped", path, len(b), buf.Len())
		total += buf.Len()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("total: %d bytes gzipped (budget %d)", total, assetBudget)
	if total > assetBudget {
		t.Fatalf("the dashboard's assets weigh %d bytes gzipped, over the budget of %d", total, assetBudget)
	}
}

// BenchmarkPages measures the server time of each page and file the
// dashboard serves (the budget is 50 ms a page).
func BenchmarkPages(b *testing.B) {
	rt := httpx.Record(httpx.NewRouter())
	(&Dashboard{}).Routes(rt)
	for _, path := range []string{"/", "/ui/assets/app.js", "/ui/assets/app.css"} {
		b.Run(path, func(b *testing.B) {
			req := httptest.NewRequest(http.MethodGet, path, nil)
			for b.Loop() {
				w := httptest.NewRecorder()
				rt.ServeHTTP(w, req)
				if w.Code != http.StatusOK {
					b.Fatalf("GET %s: %d", path, w.Code)
				}
			}
		})
	}
}
