package httpx

import (
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"

	"github.com/julienschmidt/httprouter"
)

func TestRouterRecordsEveryRegistration(t *testing.T) {
	rt := Record(NewRouter())
	h := func(w http.ResponseWriter, _ *http.Request, _ httprouter.Params) { w.WriteHeader(http.StatusTeapot) }
	rt.GET("/a", h)
	rt.POST("/a", h)
	rt.PUT("/b/:id", h)
	rt.PATCH("/b/:id", h)
	rt.DELETE("/b/:id", h)
	rt.HEAD("/a", h)
	rt.OPTIONS("/a", h)
	rt.Handle("GET", "/c/*rest", h)
	rt.Handler("GET", "/d", http.NotFoundHandler())
	rt.HandlerFunc("POST", "/d", func(w http.ResponseWriter, _ *http.Request) {})
	want := []Route{{"GET", "/a"}, {"POST", "/a"}, {"PUT", "/b/:id"}, {"PATCH", "/b/:id"}, {"DELETE", "/b/:id"},
		{"HEAD", "/a"}, {"OPTIONS", "/a"}, {"GET", "/c/*rest"}, {"GET", "/d"}, {"POST", "/d"}}
	if got := rt.Routes(); !reflect.DeepEqual(got, want) {
		t.Fatalf("routes %v, want %v", got, want)
	}
	// The recorded routes are the ones served.
	rec := httptest.NewRecorder()
	rt.ServeHTTP(rec, httptest.NewRequest("PATCH", "/b/1", nil))
	if rec.Code != http.StatusTeapot {
		t.Fatalf("PATCH /b/1: %d", rec.Code)
	}
}
