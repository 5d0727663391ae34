// Package validate checks a JSON request body against the Go type it
// decodes into, the way FastAPI/pydantic does, and collects field errors
// in the API's 422 shape ({"detail":[{"loc","msg","type"}]}).
//
// The shape check works by reflection over the type's json tags: unknown
// keys (extra_forbidden), wrong JSON types (string_type, int_type, ...) and
// missing required keys (missing) are each reported with a loc that points
// exactly at them (["body","secrets",0,"name"]). A field's `cp` tag may say
// "required" (the key must be present) and "nonnull" (null is refused).
// The rules of a particular API run afterwards on the typed value, adding
// to the same Errors.
package validate

import (
	"bytes"
	"encoding/json"
	"io"
	"maps"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"

	"slipway/server/httpx"
)

// MaxErrors caps the number of errors of one 422 response.
const MaxErrors = 100

// Errors collects the field errors of one request, up to MaxErrors.
type Errors struct {
	errs []httpx.FieldError
}

// At returns a copy of l with parts appended (never aliasing l).
func At(l []any, parts ...any) []any {
	out := make([]any, 0, len(l)+len(parts))
	out = append(out, l...)
	return append(out, parts...)
}

// Full says whether no more errors are kept.
func (v *Errors) Full() bool { return len(v.errs) >= MaxErrors }

// AddLoc records an error of type typ at loc l.
func (v *Errors) AddLoc(typ, msg string, l []any) {
	if v.Full() {
		return
	}
	v.errs = append(v.errs, httpx.FieldError{Loc: l, Msg: msg, Type: typ})
}

// Add records an error of type typ at the loc given by its parts.
func (v *Errors) Add(typ, msg string, l ...any) { v.AddLoc(typ, msg, l) }

// Len is the number of errors recorded so far.
func (v *Errors) Len() int { return len(v.errs) }

// Since returns the errors recorded after the first n.
func (v *Errors) Since(n int) []httpx.FieldError { return v.errs[n:] }

// Err is the collected errors as an *httpx.ValidationError, or nil.
func (v *Errors) Err() error {
	if len(v.errs) == 0 {
		return nil
	}
	return &httpx.ValidationError{Errors: v.errs}
}

// Decode parses body, checks its shape against dst's type (a pointer to a
// struct), then decodes into dst. Every problem of shape is reported, up to
// MaxErrors, as one *httpx.ValidationError.
func Decode(body []byte, dst any) error {
	if len(bytes.TrimSpace(body)) == 0 {
		return httpx.Invalid("missing", "Field required: the request body is empty", "body")
	}
	if err := httpx.CheckJSON(body); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var raw any
	if err := dec.Decode(&raw); err != nil {
		return httpx.JSONError(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return httpx.Invalid("json_invalid", "JSON decode error: unexpected data after the top-level value", "body")
	}
	v := &Errors{}
	v.shape(raw, reflect.TypeOf(dst).Elem(), []any{"body"}, false)
	if err := v.Err(); err != nil {
		return err
	}
	// Decode from the checked value, not from body: encoding/json matches
	// keys case-insensitively and merges duplicate keys into structs, so
	// decoding body could see input the shape check did not.
	checked, err := json.Marshal(raw)
	if err != nil {
		return httpx.JSONError(err)
	}
	if err := json.Unmarshal(checked, dst); err != nil {
		// The shape check accepted it, so this should not happen.
		return httpx.JSONError(err)
	}
	return nil
}

type fieldInfo struct {
	key      string
	index    int
	typ      reflect.Type
	required bool
	nonnull  bool
}

type structInfo struct {
	fields []fieldInfo
	byKey  map[string]int
}

var structCache sync.Map // reflect.Type → *structInfo

// InputShaper is implemented by a request type whose JSON input has another
// shape than the type itself (aliases, accepted extra keys): InputShape
// returns a value of the type to check the input against.
type InputShaper interface{ InputShape() any }

// ObjectChecker is implemented by a request type with rules across the keys
// of its JSON object (e.g. two aliases that must agree); CheckObject is
// called with the object once its keys passed the shape check.
type ObjectChecker interface {
	CheckObject(obj map[string]any, loc []any, errs *Errors)
}

var (
	inputShaperType   = reflect.TypeFor[InputShaper]()
	objectCheckerType = reflect.TypeFor[ObjectChecker]()
)

func structFields(t reflect.Type) *structInfo {
	if si, ok := structCache.Load(t); ok {
		return si.(*structInfo)
	}
	si := &structInfo{byKey: map[string]int{}}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		key, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if key == "-" {
			continue
		}
		if key == "" {
			key = f.Name
		}
		tag := f.Tag.Get("cp")
		fi := fieldInfo{key: key, index: i, typ: f.Type,
			required: strings.Contains(tag, "required"), nonnull: strings.Contains(tag, "nonnull")}
		si.byKey[key] = len(si.fields)
		si.fields = append(si.fields, fi)
	}
	structCache.Store(t, si)
	return si
}

func nullable(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Pointer, reflect.Slice, reflect.Map, reflect.Interface:
		return true
	}
	return false
}

var typeMsg = map[string]string{
	"string_type": "Input should be a valid string",
	"int_type":    "Input should be a valid integer",
	"float_type":  "Input should be a valid number",
	"bool_type":   "Input should be a valid boolean",
	"list_type":   "Input should be a valid list",
	"dict_type":   "Input should be a valid dictionary or object",
}

func (v *Errors) typeErr(typ string, l []any) { v.AddLoc(typ, typeMsg[typ], l) }

// shape checks the generic JSON value x against type t.
func (v *Errors) shape(x any, t reflect.Type, l []any, nonnull bool) {
	if v.Full() {
		return
	}
	if x == nil {
		if nullable(t) && !nonnull {
			return
		}
		v.typeErr(kindType(t), l)
		return
	}
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() == reflect.Struct && reflect.PointerTo(t).Implements(inputShaperType) {
		t = reflect.TypeOf(reflect.New(t).Interface().(InputShaper).InputShape())
	}
	switch t.Kind() {
	case reflect.Interface:
		return
	case reflect.String:
		if _, ok := x.(string); !ok {
			v.typeErr("string_type", l)
		}
	case reflect.Bool:
		if _, ok := x.(bool); !ok {
			v.typeErr("bool_type", l)
		}
	case reflect.Int, reflect.Int64:
		n, ok := x.(json.Number)
		if !ok {
			v.typeErr("int_type", l)
			return
		}
		if _, err := strconv.ParseInt(string(n), 10, 64); err != nil {
			v.typeErr("int_type", l)
		}
	case reflect.Float64:
		n, ok := x.(json.Number)
		if !ok {
			v.typeErr("float_type", l)
			return
		}
		if f, err := strconv.ParseFloat(string(n), 64); err != nil || math.IsInf(f, 0) {
			v.typeErr("float_type", l)
		}
	case reflect.Slice:
		arr, ok := x.([]any)
		if !ok {
			v.typeErr("list_type", l)
			return
		}
		for i, e := range arr {
			v.shape(e, t.Elem(), At(l, i), false)
		}
	case reflect.Map:
		obj, ok := x.(map[string]any)
		if !ok {
			v.typeErr("dict_type", l)
			return
		}
		for _, k := range sortedKeys(obj) {
			v.shape(obj[k], t.Elem(), At(l, k), false)
		}
	case reflect.Struct:
		obj, ok := x.(map[string]any)
		if !ok {
			v.typeErr("dict_type", l)
			return
		}
		si := structFields(t)
		for _, f := range si.fields {
			val, present := obj[f.key]
			if !present {
				if f.required {
					v.AddLoc("missing", "Field required", At(l, f.key))
				}
				continue
			}
			v.shape(val, f.typ, At(l, f.key), f.nonnull)
		}
		for _, k := range sortedKeys(obj) {
			if _, known := si.byKey[k]; !known {
				v.AddLoc("extra_forbidden", "Extra inputs are not permitted", At(l, k))
			}
		}
		if reflect.PointerTo(t).Implements(objectCheckerType) {
			reflect.New(t).Interface().(ObjectChecker).CheckObject(obj, l, v)
		}
	default:
		v.typeErr("dict_type", l)
	}
}

func kindType(t reflect.Type) string {
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "string_type"
	case reflect.Bool:
		return "bool_type"
	case reflect.Int, reflect.Int64:
		return "int_type"
	case reflect.Float64:
		return "float_type"
	case reflect.Slice:
		return "list_type"
	}
	return "dict_type"
}

func sortedKeys(m map[string]any) []string { return slices.Sorted(maps.Keys(m)) }
