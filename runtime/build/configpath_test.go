package build

import (
	"strings"
	"testing"
)

func TestGraphConfigPath(t *testing.T) {
	cases := []struct {
		in, want string
		bad      string // part of the error, when refused
	}{
		{"", "langgraph.json", ""},
		{"langgraph.json", "langgraph.json", ""},
		{"./agent/langgraph.json", "agent/langgraph.json", ""},
		{"agent/../langgraph.json", "langgraph.json", ""},
		{`agent\langgraph.json`, "agent/langgraph.json", ""},
		{"a/b/../../c.json", "c.json", ""},
		{"..", "", "leaves"},
		{"../../../../../master.key", "", "leaves"},
		{"agent/../../master.key", "", "leaves"},
		{`..\..\master.key`, "", "leaves"},
		{"/etc/passwd", "", "absolute"},
		{`\etc\passwd`, "", "absolute"},
		{"C:/langgraph.json", "", "absolute"},
		{"c:langgraph.json", "", "absolute"},
		{".", "", "directory"},
		{"./", "", "directory"},
		{"lang\x00graph.json", "", "control"},
		{"lang\ngraph.json", "", "control"},
		{strings.Repeat("a/", 3000), "", "longer"},
	}
	for _, tc := range cases {
		got, err := GraphConfigPath(tc.in)
		switch {
		case tc.bad == "" && (err != nil || got != tc.want):
			t.Errorf("GraphConfigPath(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		case tc.bad != "" && (err == nil || !strings.Contains(err.Error(), tc.bad)):
			t.Errorf("GraphConfigPath(%q) = %q, %v; want an error saying %q", tc.in, got, err, tc.bad)
		}
	}
}

// FuzzGraphConfigPath: whatever is accepted is relative, clean and never
// climbs out of the source.
func FuzzGraphConfigPath(f *testing.F) {
	for _, s := range []string{"langgraph.json", "../x", "/etc/passwd", `a\..\..\b`, "C:x", "a/./b//c"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		got, err := GraphConfigPath(in)
		if err != nil {
			return
		}
		if strings.HasPrefix(got, "/") || got == ".." || strings.HasPrefix(got, "../") || strings.Contains(got, `\`) || got == "." {
			t.Fatalf("GraphConfigPath(%q) = %q", in, got)
		}
	})
}
