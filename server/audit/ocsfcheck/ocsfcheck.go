// Package ocsfcheck validates events against the OCSF schema source files
// (the ocsf-schema repository's events/, objects/, profiles/ and
// dictionary.json), for tests: required attributes of a class and of every
// object present (following `extends` and `$include`), attribute types,
// arrays, enums and their captions, type_uid, and `at_least_one`
// constraints. Unknown attributes are reported too.
package ocsfcheck

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Schema is a loaded OCSF schema directory.
type Schema struct {
	dir  string
	dict map[string]attr
	typ  map[string]attr // scalar types: name → base type and range
}

type attr struct {
	Type        string                    `json:"type"`
	ObjectType  string                    `json:"object_type"`
	IsArray     bool                      `json:"is_array"`
	Requirement string                    `json:"requirement"`
	Enum        map[string]map[string]any `json:"enum"`
	Range       []float64                 `json:"range"`
}

type def struct {
	Name        string                     `json:"name"`
	UID         int                        `json:"uid"`
	Extends     string                     `json:"extends"`
	Attributes  map[string]json.RawMessage `json:"attributes"`
	Constraints map[string][]string        `json:"constraints"`
	Category    string                     `json:"category"`
}

// Dir finds ../shared/ocsf-schema-1.7.0 beside the repository.
func Dir() string {
	wd, _ := os.Getwd()
	for d := wd; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return filepath.Join(d, "..", "shared", "ocsf-schema-1.7.0")
		}
		if filepath.Dir(d) == d {
			return ""
		}
	}
}

// Load reads the dictionary of a schema directory.
func Load(dir string) (*Schema, error) {
	raw, err := os.ReadFile(filepath.Join(dir, "dictionary.json"))
	if err != nil {
		return nil, err
	}
	var d struct {
		Attributes map[string]attr `json:"attributes"`
		Types      struct {
			Attributes map[string]attr `json:"attributes"`
		} `json:"types"`
	}
	if err := json.Unmarshal(raw, &d); err != nil {
		return nil, fmt.Errorf("dictionary: %w", err)
	}
	return &Schema{dir: dir, dict: d.Attributes, typ: d.Types.Attributes}, nil
}

// merged is a class or object with its whole inheritance applied.
type merged struct {
	attrs       map[string]attr
	constraints map[string][]string
}

func (s *Schema) readDef(path string) (*def, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var d def
	if err := json.Unmarshal(raw, &d); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &d, nil
}

// resolve merges a definition's chain: parents first, then includes, then
// its own attributes (whose fields override the inherited ones).
func (s *Schema) resolve(d *def, find func(name string) (*def, error)) (merged, error) {
	m := merged{attrs: map[string]attr{}, constraints: d.Constraints}
	if d.Extends != "" && d.Extends != "object" {
		p, err := find(d.Extends)
		if err != nil {
			return m, err
		}
		pm, err := s.resolve(p, find)
		if err != nil {
			return m, err
		}
		for k, v := range pm.attrs {
			m.attrs[k] = v
		}
		if m.constraints == nil {
			m.constraints = pm.constraints
		}
	}
	apply := func(attrs map[string]json.RawMessage) error {
		for k, raw := range attrs {
			if k == "$include" {
				var files []string
				if err := json.Unmarshal(raw, &files); err != nil {
					return err
				}
				for _, f := range files {
					// A profile's attributes apply only to events that declare
					// it in metadata.profiles; Slipway declares none.
					if strings.HasPrefix(f, "profiles/") {
						continue
					}
					inc, err := s.readDef(filepath.Join(s.dir, f))
					if err != nil {
						return err
					}
					for ik, iraw := range inc.Attributes {
						if ik == "$include" {
							continue
						}
						if err := overlay(m.attrs, ik, iraw); err != nil {
							return err
						}
					}
				}
				continue
			}
			if err := overlay(m.attrs, k, raw); err != nil {
				return err
			}
		}
		return nil
	}
	return m, apply(d.Attributes)
}

// overlay merges one attribute definition over an inherited one.
func overlay(attrs map[string]attr, k string, raw json.RawMessage) error {
	base := attrs[k]
	var over map[string]json.RawMessage
	if err := json.Unmarshal(raw, &over); err != nil {
		return nil // not an attribute definition
	}
	b, _ := json.Marshal(base)
	var merged map[string]json.RawMessage
	_ = json.Unmarshal(b, &merged)
	if merged == nil {
		merged = map[string]json.RawMessage{}
	}
	for kk, vv := range over {
		if kk == "enum" && merged["enum"] != nil && string(merged["enum"]) != "null" {
			var a, o map[string]json.RawMessage
			_ = json.Unmarshal(merged["enum"], &a)
			_ = json.Unmarshal(vv, &o)
			for ek, ev := range o {
				a[ek] = ev
			}
			vv, _ = json.Marshal(a)
		}
		merged[kk] = vv
	}
	out, _ := json.Marshal(merged)
	var at attr
	if err := json.Unmarshal(out, &at); err != nil {
		return err
	}
	attrs[k] = at
	return nil
}

func (s *Schema) findEvent(name string) (*def, error) {
	var found *def
	err := filepath.Walk(filepath.Join(s.dir, "events"), func(p string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() || found != nil || !strings.HasSuffix(p, ".json") {
			return err
		}
		d, err := s.readDef(p)
		if err == nil && d.Name == name {
			found = d
		}
		return nil
	})
	if found == nil && err == nil {
		err = fmt.Errorf("event class %q not found", name)
	}
	return found, err
}

func (s *Schema) findObject(name string) (*def, error) {
	return s.readDef(filepath.Join(s.dir, "objects", name+".json"))
}

// ValidateAPIActivity validates an API Activity (6003) event.
func (s *Schema) ValidateAPIActivity(ev map[string]any) []string {
	var v []string
	cls, err := s.findEvent("api_activity")
	if err != nil {
		return []string{err.Error()}
	}
	m, err := s.resolve(cls, s.findEvent)
	if err != nil {
		return []string{err.Error()}
	}
	if n, _ := ev["class_uid"].(float64); n != 6003 {
		v = append(v, fmt.Sprintf("class_uid %v, want 6003", ev["class_uid"]))
	}
	// The uid enums are generated per class by the schema server, not in the
	// source files: check the class's own values here.
	if n, _ := ev["category_uid"].(float64); n != 6 {
		v = append(v, fmt.Sprintf("category_uid %v, want 6", ev["category_uid"]))
	}
	if ev["class_name"] != nil && ev["class_name"] != "API Activity" || ev["category_name"] != nil && ev["category_name"] != "Application Activity" {
		v = append(v, "class_name/category_name do not match class 6003")
	}
	a, _ := ev["activity_id"].(float64)
	c, _ := ev["class_uid"].(float64)
	if t, _ := ev["type_uid"].(float64); t != c*100+a {
		v = append(v, fmt.Sprintf("type_uid %v is not class_uid*100+activity_id", ev["type_uid"]))
	}
	if md, ok := ev["metadata"].(map[string]any); !ok || md["version"] != "1.7.0" {
		v = append(v, "metadata.version must be 1.7.0")
	}
	v = append(v, s.check("", ev, m)...)
	sort.Strings(v)
	return v
}

var captions = map[string]string{"activity_id": "activity_name", "severity_id": "severity", "status_id": "status",
	"category_uid": "category_name", "class_uid": "class_name"}

func (s *Schema) check(path string, obj map[string]any, m merged) []string {
	var v []string
	for name, a := range m.attrs {
		if a.Requirement == "required" {
			if val, ok := obj[name]; !ok || val == nil {
				v = append(v, fmt.Sprintf("%s%s: required attribute missing", path, name))
			}
		}
	}
	if alo := m.constraints["at_least_one"]; len(alo) > 0 {
		ok := false
		for _, n := range alo {
			if obj[n] != nil {
				ok = true
			}
		}
		if !ok {
			v = append(v, fmt.Sprintf("%s: at least one of %v is required", strings.TrimSuffix(path, "."), alo))
		}
	}
	for name, val := range obj {
		a, known := m.attrs[name]
		if !known {
			v = append(v, fmt.Sprintf("%s%s: not an attribute here", path, name))
			continue
		}
		if val == nil {
			continue
		}
		da := s.dict[name]
		typ := firstNonEmpty(a.Type, da.Type)
		objType := firstNonEmpty(a.ObjectType, da.ObjectType)
		isArray := a.IsArray || da.IsArray
		enum := a.Enum
		if enum == nil {
			enum = da.Enum
		}
		if name == "class_uid" || name == "category_uid" || name == "type_uid" {
			enum = nil // generated per class; checked in ValidateAPIActivity
		}
		vals := []any{val}
		if isArray {
			list, ok := val.([]any)
			if !ok {
				v = append(v, fmt.Sprintf("%s%s: must be an array", path, name))
				continue
			}
			vals = list
		}
		for i, x := range vals {
			p := path + name
			if isArray {
				p = fmt.Sprintf("%s[%d]", p, i)
			}
			v = append(v, s.checkValue(p, x, typ, objType, enum)...)
		}
		if capName, ok := captions[name]; ok && enum != nil {
			if id, ok := val.(float64); ok && id != 99 {
				if e, ok := enum[fmt.Sprint(int(id))]; ok && obj[capName] != nil && obj[capName] != e["caption"] {
					v = append(v, fmt.Sprintf("%s%s: %v does not match %s %v (%v)", path, capName, obj[capName], name, id, e["caption"]))
				}
			}
		}
	}
	return v
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func (s *Schema) checkValue(path string, x any, typ, objType string, enum map[string]map[string]any) []string {
	if typ == "object_t" || (!strings.HasSuffix(typ, "_t") && typ != "") {
		name := objType
		if name == "" {
			name = typ
		}
		if name == "object" || typ == "json_t" {
			return nil // free-form (unmapped, etc.)
		}
		o, ok := x.(map[string]any)
		if !ok {
			return []string{fmt.Sprintf("%s: must be an object (%s)", path, name)}
		}
		d, err := s.findObject(name)
		if err != nil {
			return []string{fmt.Sprintf("%s: object type %s: %v", path, name, err)}
		}
		m, err := s.resolve(d, s.findObject)
		if err != nil {
			return []string{err.Error()}
		}
		return s.check(path+".", o, m)
	}
	base := typ
	for i := 0; i < 4; i++ {
		if t, ok := s.typ[base]; ok && t.Type != "" && t.Type != base {
			if r := s.typ[typ].Range; len(r) == 2 {
				if n, ok := x.(float64); ok && (n < r[0] || n > r[1]) {
					return []string{fmt.Sprintf("%s: %v outside %v", path, n, r)}
				}
			}
			base = t.Type
			continue
		}
		break
	}
	var bad string
	switch base {
	case "string_t":
		if _, ok := x.(string); !ok {
			bad = "a string"
		}
	case "integer_t", "long_t":
		n, ok := x.(float64)
		if !ok || n != math.Trunc(n) {
			bad = "an integer"
		} else if typ == "timestamp_t" && (n < 946684800000 || n > 4102444800000) {
			bad = "a timestamp in epoch milliseconds"
		}
	case "float_t":
		if _, ok := x.(float64); !ok {
			bad = "a number"
		}
	case "boolean_t":
		if _, ok := x.(bool); !ok {
			bad = "a boolean"
		}
	}
	if bad != "" {
		return []string{fmt.Sprintf("%s: must be %s (%s), got %v", path, bad, typ, x)}
	}
	if enum != nil {
		if n, ok := x.(float64); ok {
			if _, ok := enum[fmt.Sprint(int(n))]; !ok {
				return []string{fmt.Sprintf("%s: %v is not in the enum", path, n)}
			}
		}
	}
	return nil
}
