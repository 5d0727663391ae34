package agent

import (
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
)

// Stored records are read with unmarshalStored, not json.Unmarshal:
// encoding/json refuses to decode anything nested more than 10,000 levels,
// and a record can be deeper than the input it holds (a checkpoint wraps
// its writes in metadata.writes.<node>). Older versions accepted inputs up
// to that limit, and a command graph's output is not bounded by the API's
// check, so a thread could be written that no read could decode again:
// history and copy answered 500 forever. Reads must not depend on the
// nesting of what was stored, so a record too deep for encoding/json is
// parsed by parseDeep, which has no nesting limit, and assigned to its Go
// type by assignDeep. encoding/json's encoder has no depth limit, so such
// a record is served and copied as it was stored.

// unmarshalStored decodes a stored record into v whatever its nesting.
func unmarshalStored(raw []byte, v any) error {
	err := json.Unmarshal(raw, v)
	var se *json.SyntaxError
	if err == nil || !errors.As(err, &se) || !strings.Contains(se.Error(), "exceeded max depth") {
		return err
	}
	val, err := parseDeep(raw)
	if err != nil {
		return fmt.Errorf("decode deep record: %w", err)
	}
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		return errors.New("unmarshalStored: want a non-nil pointer")
	}
	return assignDeep(rv.Elem(), val)
}

var (
	anyType         = reflect.TypeFor[any]()
	jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// assignDeep stores val (as parseDeep returns it) into rv as json.Unmarshal
// would: any-typed places take the value as it is; structs, pointers,
// slices and maps are walked; leaves go through encoding/json.
func assignDeep(rv reflect.Value, val any) error {
	t := rv.Type()
	if t == anyType {
		if val != nil {
			rv.Set(reflect.ValueOf(val))
		} else {
			rv.SetZero()
		}
		return nil
	}
	if rv.CanAddr() && (reflect.PointerTo(t).Implements(jsonUnmarshaler) || reflect.PointerTo(t).Implements(textUnmarshaler)) {
		return assignLeaf(rv, val)
	}
	switch t.Kind() {
	case reflect.Pointer:
		if val == nil {
			rv.SetZero()
			return nil
		}
		p := reflect.New(t.Elem())
		if err := assignDeep(p.Elem(), val); err != nil {
			return err
		}
		rv.Set(p)
		return nil
	case reflect.Struct:
		m, ok := val.(map[string]any)
		if !ok {
			return assignLeaf(rv, val)
		}
		return assignFields(rv, m)
	case reflect.Slice:
		list, ok := val.([]any)
		if !ok {
			return assignLeaf(rv, val)
		}
		s := reflect.MakeSlice(t, len(list), len(list))
		for i, x := range list {
			if err := assignDeep(s.Index(i), x); err != nil {
				return err
			}
		}
		rv.Set(s)
		return nil
	case reflect.Map:
		m, ok := val.(map[string]any)
		if !ok || t.Key().Kind() != reflect.String {
			return assignLeaf(rv, val)
		}
		out := reflect.MakeMapWithSize(t, len(m))
		for k, x := range m {
			e := reflect.New(t.Elem()).Elem()
			if err := assignDeep(e, x); err != nil {
				return err
			}
			out.SetMapIndex(reflect.ValueOf(k).Convert(t.Key()), e)
		}
		rv.Set(out)
		return nil
	}
	return assignLeaf(rv, val)
}

// assignFields fills a struct's fields from an object by their json names,
// embedded structs included.
func assignFields(rv reflect.Value, m map[string]any) error {
	t := rv.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct {
			if err := assignFields(rv.Field(i), m); err != nil {
				return err
			}
			continue
		}
		if name == "" {
			name = f.Name
		}
		if x, ok := m[name]; ok {
			if err := assignDeep(rv.Field(i), x); err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
		}
	}
	return nil
}

// assignLeaf decodes a value that is not deep (a string, number, time…)
// through encoding/json.
func assignLeaf(rv reflect.Value, val any) error {
	b, err := json.Marshal(val)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, rv.Addr().Interface())
}

// maxDeepNesting bounds parseDeep's recursion well inside Go's stack limit;
// no version of Slipway could store anything near it (request bodies were
// always decoded by encoding/json first).
const maxDeepNesting = 1 << 16

// parseDeep parses JSON like json.Unmarshal into an any (objects as
// map[string]any, arrays as []any, numbers as float64), without
// encoding/json's nesting limit. It only runs on records Slipway wrote
// itself, which are valid JSON.
func parseDeep(b []byte) (any, error) {
	p := deepParser{b: b}
	v, err := p.value(0)
	if err != nil {
		return nil, err
	}
	p.ws()
	if p.i != len(p.b) {
		return nil, fmt.Errorf("unexpected data at offset %d", p.i)
	}
	return v, nil
}

type deepParser struct {
	b []byte
	i int
}

func (p *deepParser) ws() {
	for p.i < len(p.b) && (p.b[p.i] == ' ' || p.b[p.i] == '\t' || p.b[p.i] == '\n' || p.b[p.i] == '\r') {
		p.i++
	}
}

func (p *deepParser) value(depth int) (any, error) {
	if depth > maxDeepNesting {
		return nil, fmt.Errorf("nesting deeper than %d", maxDeepNesting)
	}
	p.ws()
	if p.i >= len(p.b) {
		return nil, errors.New("unexpected end of input")
	}
	switch p.b[p.i] {
	case '{':
		p.i++
		m := map[string]any{}
		p.ws()
		if p.i < len(p.b) && p.b[p.i] == '}' {
			p.i++
			return m, nil
		}
		for {
			p.ws()
			k, err := p.leaf()
			if err != nil {
				return nil, err
			}
			key, ok := k.(string)
			if !ok {
				return nil, fmt.Errorf("object key at offset %d is not a string", p.i)
			}
			p.ws()
			if p.i >= len(p.b) || p.b[p.i] != ':' {
				return nil, fmt.Errorf("expected ':' at offset %d", p.i)
			}
			p.i++
			v, err := p.value(depth + 1)
			if err != nil {
				return nil, err
			}
			m[key] = v
			if done, err := p.next('}'); err != nil || done {
				return m, err
			}
		}
	case '[':
		p.i++
		list := []any{}
		p.ws()
		if p.i < len(p.b) && p.b[p.i] == ']' {
			p.i++
			return list, nil
		}
		for {
			v, err := p.value(depth + 1)
			if err != nil {
				return nil, err
			}
			list = append(list, v)
			if done, err := p.next(']'); err != nil || done {
				return list, err
			}
		}
	default:
		return p.leaf()
	}
}

// next consumes ',' (false) or the closing byte (true).
func (p *deepParser) next(closing byte) (bool, error) {
	p.ws()
	if p.i < len(p.b) {
		switch p.b[p.i] {
		case ',':
			p.i++
			return false, nil
		case closing:
			p.i++
			return true, nil
		}
	}
	return false, fmt.Errorf("expected ',' or '%c' at offset %d", closing, p.i)
}

// leaf decodes a string, number or literal with encoding/json, so escapes
// and numbers mean exactly what they mean everywhere else.
func (p *deepParser) leaf() (any, error) {
	start := p.i
	if p.i < len(p.b) && p.b[p.i] == '"' {
		p.i++
		for p.i < len(p.b) && p.b[p.i] != '"' {
			if p.b[p.i] == '\\' {
				p.i++
			}
			p.i++
		}
		p.i++
	} else {
		for p.i < len(p.b) && strings.IndexByte(",]} \t\r\n", p.b[p.i]) < 0 {
			p.i++
		}
	}
	if p.i > len(p.b) || p.i == start {
		return nil, fmt.Errorf("unexpected end of input at offset %d", start)
	}
	var v any
	if err := json.Unmarshal(p.b[start:p.i], &v); err != nil {
		return nil, fmt.Errorf("value at offset %d: %w", start, err)
	}
	return v, nil
}
