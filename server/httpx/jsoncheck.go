package httpx

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// MaxJSONDepth is the deepest nesting of objects and arrays a request body
// may have. Real inputs stay far below it: a LangGraph input with messages,
// content blocks and tool-call arguments is about ten levels deep, and the
// control-plane and organization bodies fewer. It is far enough below
// encoding/json's own limit (10,000) that a value stored inside the agent's
// records (a checkpoint wraps its input in a few more levels) can always
// be decoded again, and it bounds the recursion of whatever walks a value.
const MaxJSONDepth = 256

// CheckJSON is run on every JSON request body of Slipway's servers (control
// plane, organization API, agent API) before it is decoded, and refuses
// what encoding/json would silently accept:
//   - nesting deeper than MaxJSONDepth;
//   - an object with the same key twice (encoding/json keeps the last one,
//     so two readers of one body could disagree on what it says);
//   - a string, key or value, that is not valid UTF-8, or that escapes
//     half of a UTF-16 surrogate pair (encoding/json turns both into
//     U+FFFD, silently changing a secret or a name).
//
// Each is a 422 whose loc names where, e.g. ["body", "secrets", 0, "value"].
// Syntax errors are not reported here: the decoder that runs next reports
// them with their offset, as before. One pass, no allocation for bodies
// without escaped keys or large objects.
func CheckJSON(body []byte) error {
	c := checker{b: body, path: make([]frame, 0, 16), keys: make([][]byte, 0, 32)}
	if err := c.value(0); err != nil {
		if errors.Is(err, errSyntax) {
			return nil
		}
		return err
	}
	return nil
}

// errSyntax stops the check at malformed JSON, left to the decoder.
var errSyntax = errors.New("json syntax")

// frame is one step of the path to the current value: an object key (as
// raw bytes of the body, or unescaped) or an array index.
type frame struct {
	key   []byte
	index int
	array bool
}

type checker struct {
	b    []byte
	i    int
	path []frame
	keys [][]byte // keys of the objects being read, innermost last
}

// loc renders the current path, plus extra, as a 422 loc.
func (c *checker) loc(extra ...any) []any {
	out := make([]any, 0, len(c.path)+1+len(extra))
	out = append(out, "body")
	for _, f := range c.path {
		if f.array {
			out = append(out, f.index)
		} else {
			out = append(out, strings.ToValidUTF8(string(f.key), "\uFFFD"))
		}
	}
	return append(out, extra...)
}

func (c *checker) ws() {
	for c.i < len(c.b) {
		switch c.b[c.i] {
		case ' ', '\t', '\n', '\r':
			c.i++
		default:
			return
		}
	}
}

func (c *checker) value(depth int) error {
	c.ws()
	if c.i >= len(c.b) {
		return errSyntax
	}
	switch c.b[c.i] {
	case '{', '[':
		if depth == MaxJSONDepth {
			return &ValidationError{Errors: []FieldError{{Loc: c.loc(), Type: "json_invalid",
				Msg: fmt.Sprintf("JSON nesting is deeper than %d levels", MaxJSONDepth)}}}
		}
		if c.b[c.i] == '{' {
			return c.object(depth + 1)
		}
		return c.array(depth + 1)
	case '"':
		_, err := c.str(false)
		return err
	default:
		// Numbers and literals: their syntax is the decoder's concern.
		start := c.i
		for c.i < len(c.b) && isLiteralByte(c.b[c.i]) {
			c.i++
		}
		if c.i == start {
			return errSyntax
		}
		return nil
	}
}

func isLiteralByte(b byte) bool {
	return b >= '0' && b <= '9' || b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b == '-' || b == '+' || b == '.'
}

// smallObject is the size up to which duplicate keys are found by
// comparing with each earlier key rather than with a map.
const smallObject = 16

func (c *checker) object(depth int) error {
	c.i++ // {
	first := len(c.keys)
	defer func() { c.keys = c.keys[:first] }()
	var seen map[string]struct{}
	c.path = append(c.path, frame{})
	defer func() { c.path = c.path[:len(c.path)-1] }()
	c.ws()
	if c.i < len(c.b) && c.b[c.i] == '}' {
		c.i++
		return nil
	}
	for {
		c.ws()
		if c.i >= len(c.b) || c.b[c.i] != '"' {
			return errSyntax
		}
		key, err := c.str(true)
		if err != nil {
			return err
		}
		dup := false
		if seen != nil {
			_, dup = seen[string(key)]
			seen[string(key)] = struct{}{}
		} else {
			for _, k := range c.keys[first:] {
				if bytes.Equal(k, key) {
					dup = true
					break
				}
			}
			c.keys = append(c.keys, key)
			if len(c.keys)-first > smallObject {
				seen = make(map[string]struct{}, 2*smallObject)
				for _, k := range c.keys[first:] {
					seen[string(k)] = struct{}{}
				}
			}
		}
		if dup {
			c.path = c.path[:len(c.path)-1]
			loc := c.loc(strings.ToValidUTF8(string(key), "\uFFFD"))
			c.path = append(c.path, frame{})
			return &ValidationError{Errors: []FieldError{{Loc: loc, Type: "json_invalid",
				Msg: fmt.Sprintf("duplicate key %q: a key may appear only once in an object", key)}}}
		}
		c.path[len(c.path)-1] = frame{key: key}
		c.ws()
		if c.i >= len(c.b) || c.b[c.i] != ':' {
			return errSyntax
		}
		c.i++
		if err := c.value(depth); err != nil {
			return err
		}
		if more, err := c.next('}'); err != nil || !more {
			return err
		}
	}
}

// next consumes what follows a member or element: a comma (more to come)
// or the container's closing byte.
func (c *checker) next(closing byte) (more bool, err error) {
	c.ws()
	if c.i >= len(c.b) {
		return false, errSyntax
	}
	switch c.b[c.i] {
	case ',':
		c.i++
		return true, nil
	case closing:
		c.i++
		return false, nil
	}
	return false, errSyntax
}

func (c *checker) array(depth int) error {
	c.i++ // [
	c.path = append(c.path, frame{array: true})
	defer func() { c.path = c.path[:len(c.path)-1] }()
	c.ws()
	if c.i < len(c.b) && c.b[c.i] == ']' {
		c.i++
		return nil
	}
	for n := 0; ; n++ {
		c.path[len(c.path)-1].index = n
		if err := c.value(depth); err != nil {
			return err
		}
		if more, err := c.next(']'); err != nil || !more {
			return err
		}
	}
}

// str reads the string at c.i. For a key it returns the key as the
// decoder will see it: the raw bytes when nothing is escaped, else
// unescaped.
func (c *checker) str(isKey bool) ([]byte, error) {
	start := c.i
	c.i++ // opening quote
	escaped := false
	for c.i < len(c.b) {
		b := c.b[c.i]
		switch {
		case b == '"':
			raw := c.b[start+1 : c.i]
			c.i++
			if !isKey || !escaped {
				return raw, nil
			}
			var s string
			if err := json.Unmarshal(c.b[start:c.i], &s); err != nil {
				return nil, errSyntax
			}
			return []byte(s), nil
		case b == '\\':
			escaped = true
			if c.i+1 >= len(c.b) {
				return nil, errSyntax
			}
			if c.b[c.i+1] != 'u' {
				c.i += 2
				continue
			}
			r, ok := hex4(c.b, c.i+2)
			if !ok {
				return nil, errSyntax
			}
			c.i += 6
			if !utf16.IsSurrogate(r) {
				continue
			}
			// A high surrogate must be followed by an escaped low one.
			if r < 0xDC00 && c.i+1 < len(c.b) && c.b[c.i] == '\\' && c.b[c.i+1] == 'u' {
				if r2, ok := hex4(c.b, c.i+2); ok && r2 >= 0xDC00 && r2 <= 0xDFFF {
					c.i += 6
					continue
				}
			}
			return nil, c.unicodeError(isKey, start)
		case b < 0x20:
			return nil, errSyntax
		case b < utf8.RuneSelf:
			c.i++
		default:
			r, size := utf8.DecodeRune(c.b[c.i:])
			if r == utf8.RuneError && size == 1 {
				return nil, c.unicodeError(isKey, start)
			}
			c.i += size
		}
	}
	return nil, errSyntax
}

func (c *checker) unicodeError(isKey bool, start int) error {
	msg := "Input should be a valid string, unable to parse raw data as a unicode string"
	loc := c.loc()
	if isKey {
		// The key itself is bad: name the object and the key as it can be shown.
		end := bytes.IndexByte(c.b[c.i:], '"')
		if end < 0 {
			end = len(c.b) - c.i
		}
		key := strings.ToValidUTF8(string(c.b[start+1:c.i+end]), "\uFFFD")
		loc = c.loc()
		loc = append(loc[:len(loc)-1], key)
		msg = "object key is not valid UTF-8"
	}
	return &ValidationError{Errors: []FieldError{{Loc: loc, Type: "string_unicode", Msg: msg}}}
}

func hex4(b []byte, at int) (rune, bool) {
	if at+4 > len(b) {
		return 0, false
	}
	var r rune
	for _, h := range b[at : at+4] {
		r <<= 4
		switch {
		case h >= '0' && h <= '9':
			r |= rune(h - '0')
		case h >= 'a' && h <= 'f':
			r |= rune(h - 'a' + 10)
		case h >= 'A' && h <= 'F':
			r |= rune(h - 'A' + 10)
		default:
			return 0, false
		}
	}
	return r, true
}
