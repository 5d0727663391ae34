package config

import (
	"strings"
	"testing"
	"time"
)

func TestAuditForwardConfig(t *testing.T) {
	c, err := LoadServe(map[string]string{})
	if err != nil || c.AuditForwardURL != "" || c.AuditForwardInterval != time.Hour {
		t.Fatalf("defaults: %+v, %v", c, err)
	}
	for _, ok := range []string{"http://127.0.0.1:9/hook", "https://siem.example.com/in?token=x", "file:///var/log/audit.jsonl"} {
		if _, err := LoadServe(map[string]string{"SLIPWAY_AUDIT_FORWARD_URL": ok}); err != nil {
			t.Errorf("%s refused: %v", ok, err)
		}
	}
	for _, bad := range []string{"ftp://x/y", "http://", "file://host/x", "file:///", "file:relative", "::"} {
		_, err := LoadServe(map[string]string{"SLIPWAY_AUDIT_FORWARD_URL": bad})
		if err == nil || !strings.Contains(err.Error(), "SLIPWAY_AUDIT_FORWARD_URL") {
			t.Errorf("%q: err = %v", bad, err)
		}
	}
	c, err = LoadServe(map[string]string{"SLIPWAY_AUDIT_FORWARD_INTERVAL": "2s"})
	if err != nil || c.AuditForwardInterval != 2*time.Second {
		t.Errorf("interval: %v %v", c.AuditForwardInterval, err)
	}
	for _, bad := range []string{"10ms", "soon", "48h"} {
		_, err := LoadServe(map[string]string{"SLIPWAY_AUDIT_FORWARD_INTERVAL": bad})
		if err == nil || !strings.Contains(err.Error(), "SLIPWAY_AUDIT_FORWARD_INTERVAL") {
			t.Errorf("%q: err = %v", bad, err)
		}
	}
}
