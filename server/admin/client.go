package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Client talks to a running server's admin socket.
type Client struct {
	DataDir string
	Socket  string
	http    *http.Client
}

// NewClient returns a client for the server using dataDir: its socket in
// <dataDir>/admin/, or where earlier versions put it when only that exists.
func NewClient(dataDir string) *Client {
	sock := filepath.Join(dataDir, Dir, SocketName)
	if old := filepath.Join(dataDir, SocketName); !exists(sock) && exists(old) {
		sock = old
	}
	return &Client{DataDir: dataDir, Socket: sock, http: &http.Client{
		Timeout: 5 * time.Minute, // verify walks every chain
		Transport: &http.Transport{
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, "unix", sock)
			},
		},
	}}
}

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

// APIError is an error answer of the admin API.
type APIError struct {
	Status int
	Detail string
}

func (e *APIError) Error() string { return e.Detail }

// ErrNotRunning means no server answers on the admin socket.
var ErrNotRunning = errors.New("slipway is not running")

func (c *Client) notRunning(why string) error {
	return fmt.Errorf("%w: %s (start `slipway serve` with SLIPWAY_DATA_DIR=%s, or point SLIPWAY_DATA_DIR at its data directory)",
		ErrNotRunning, why, c.DataDir)
}

// Do sends one request; body (when not nil) is sent as JSON and a 2xx
// answer is decoded into out (when not nil).
func (c *Client) Do(method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		raw, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, "http://slipway-admin"+path, rd)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	// Read for each request: a restarted server wrote a new one.
	if tok, err := os.ReadFile(filepath.Join(c.DataDir, Dir, TokenName)); err == nil {
		req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(tok)))
	} else if errors.Is(err, os.ErrPermission) {
		return fmt.Errorf("permission denied on %s: run this as the user that runs slipway serve, or as root", filepath.Join(c.DataDir, Dir))
	}
	resp, err := c.http.Do(req)
	if err != nil {
		switch {
		case errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ENOENT):
			return c.notRunning("no admin socket at " + c.Socket)
		case errors.Is(err, syscall.ECONNREFUSED):
			return c.notRunning("nothing answers on " + c.Socket + " (a stale socket)")
		case errors.Is(err, os.ErrPermission) || errors.Is(err, syscall.EACCES):
			return fmt.Errorf("permission denied on %s: run this as the user that runs slipway serve, or as root", c.Socket)
		}
		return fmt.Errorf("admin socket %s: %w", c.Socket, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		var e struct {
			Detail json.RawMessage `json:"detail"`
		}
		detail := string(bytes.TrimSpace(raw))
		if json.Unmarshal(raw, &e) == nil && e.Detail != nil {
			var s string
			if json.Unmarshal(e.Detail, &s) == nil {
				detail = s
			} else {
				detail = string(e.Detail)
			}
		}
		return &APIError{Status: resp.StatusCode, Detail: detail}
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			return fmt.Errorf("admin answer: %w", err)
		}
	}
	return nil
}
