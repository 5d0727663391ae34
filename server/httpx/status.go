package httpx

import "net/http"

// StatusRecorder is a ResponseWriter that remembers the status its
// handler answered, for metrics and traces. It passes flushes on (event
// streams keep streaming) and unwraps for http.ResponseController (full
// duplex, deadlines, hijacking).
type StatusRecorder struct {
	http.ResponseWriter
	status int // 0 until the handler answers; informational (1xx) answers are not it
	bytes  int // body bytes written
}

func (s *StatusRecorder) WriteHeader(code int) {
	if s.status == 0 && code >= 200 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *StatusRecorder) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	n, err := s.ResponseWriter.Write(b)
	s.bytes += n
	return n, err
}

// Flush keeps event streams streaming through the recorder.
func (s *StatusRecorder) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection.
func (s *StatusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// Code is the answered status; a handler that wrote nothing answered 200.
func (s *StatusRecorder) Code() int {
	if s.status == 0 {
		return http.StatusOK
	}
	return s.status
}

// Written reports whether the handler answered at all.
func (s *StatusRecorder) Written() bool { return s.status != 0 }
