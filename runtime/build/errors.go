package build

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/BurntSushi/toml"
)

// Errors about a project's files go to the build log and the revision's
// status, which every member of the workspace reads. A project file may
// hold secrets (an env file holds nothing else), and the parsers' own
// messages quote what they choke on (godotenv quotes the rest of the file
// "near" the error, encoding/json the offending character, BurntSushi/toml
// the value): these helpers say where instead, by line.

// lineAt is the 1-based line of byte offset off of src.
func lineAt(src []byte, off int) int {
	if off < 0 {
		off = 0
	}
	if off > len(src) {
		off = len(src)
	}
	return bytes.Count(src[:off], []byte("\n")) + 1
}

// envSyntax says which line of an env file godotenv refused and why,
// without a byte of the file. godotenv's errors carry the position only
// as a quote of the file from it on, which is what is used to find it.
func envSyntax(raw []byte, err error) string {
	// godotenv parses with "\r\n" made "\n"; lines count the same.
	src := bytes.ReplaceAll(raw, []byte("\r\n"), []byte("\n"))
	msg := err.Error()
	line := 0
	var what string
	switch {
	case strings.HasPrefix(msg, "unexpected character "):
		what = "expected a variable name (letters, digits, '_' and '.') followed by '=' and its value"
		const near = " in variable name near "
		if i := strings.Index(msg, near); i >= 0 {
			if rest, err := strconv.Unquote(msg[i+len(near):]); err == nil && bytes.HasSuffix(src, []byte(rest)) {
				line = lineAt(src, len(src)-len(rest))
			}
		}
	case strings.HasPrefix(msg, "unterminated quoted value "):
		what = "a quoted value is not closed"
		// The quote of the value from its opening quote to the end of that
		// line; the failing one is the last such (a later one would have
		// closed it).
		frag := []byte(strings.TrimPrefix(msg, "unterminated quoted value "))
		for off := len(src) - len(frag); off >= 0 && len(frag) > 0; off-- {
			end := off + len(frag)
			if bytes.HasPrefix(src[off:], frag) && (end == len(src) || src[end] == '\n') {
				line = lineAt(src, off)
				break
			}
		}
	default:
		what = "not a valid .env file"
	}
	if line > 0 {
		return fmt.Sprintf("line %d: %s", line, what)
	}
	return what
}

// jsonError is a JSON decoding error of raw by line, without the
// character encoding/json quotes.
func jsonError(raw []byte, err error) error {
	var syn *json.SyntaxError
	if errors.As(err, &syn) {
		return fmt.Errorf("line %d: not valid JSON", lineAt(raw, int(syn.Offset)))
	}
	if err.Error() == "unexpected end of JSON input" {
		return errors.New("the file ends inside a JSON value")
	}
	// Type errors name Go types and JSON kinds, nothing of the file.
	return err
}

// tomlError is a TOML decoding error by line, without the key or value
// BurntSushi/toml quotes.
func tomlError(err error) error {
	var pe toml.ParseError
	if errors.As(err, &pe) {
		return fmt.Errorf("line %d: not valid TOML", pe.Position.Line)
	}
	return errors.New("not valid TOML")
}
