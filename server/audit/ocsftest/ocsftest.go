// Package ocsftest validates events against the raw source files of an OCSF
// schema (the ocsf-schema repository at a release tag: events/, objects/,
// profiles/, dictionary.json, categories.json, version.json). It is meant
// for tests: Load a schema once, then ValidateEvent every event a producer
// emits and fail on any violation.
//
// The class is resolved from class_uid (category uid * 1000 + class uid).
// Classes and objects are merged the way the OCSF schema server merges them:
// `$include`d files first, then the file's own attributes, then that result
// over the `extends` parent, then over the dictionary.json definition of
// each attribute (so enums are the union of all levels). Attributes that
// come from a profile apply only when metadata.profiles declares that
// profile, exactly as the OCSF server's validator does.
//
// Enforced rules:
//   - required attributes (of the class and of every object present) are
//     present and not null; null is accepted for any attribute that is not
//     required;
//   - every key is a known attribute of its class or object (the open
//     "object" type, e.g. unmapped, and json_t values are not inspected);
//   - types: string_t, integer_t/long_t (JSON numbers without fraction or
//     exponent), float_t, boolean_t, json_t, objects (recursively), arrays
//     exactly where is_array is true; the dictionary "types" constraints
//     (regex, max_len, range) of subtypes such as ip_t, port_t, uuid_t,
//     email_t, mac_t, datetime_t;
//   - timestamp_t values are epoch milliseconds between 2000-01-01 and
//     2100-01-01 (catches seconds, microseconds and nanoseconds);
//   - enums: the value is one of the enum's keys (integers for *_id); the
//     sibling caption (activity_name, severity, status, type, ...) equals the
//     enum caption unless the id is 99 (Other); category_uid and class_uid
//     must be those of the resolved class, with category_name/class_name
//     their captions; type_uid = class_uid*100 + activity_id and type_name
//     "<class caption>: <activity caption>";
//   - metadata.version equals the schema's version (version.json);
//   - metadata.profiles names known profiles;
//   - object and class constraints: at_least_one and just_one (null counts
//     as absent).
package ocsftest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Timestamps (timestamp_t) must fall in [minTimestamp, maxTimestamp):
// 2000-01-01T00:00:00Z and 2100-01-01T00:00:00Z in epoch milliseconds.
const (
	minTimestamp = 946684800000
	maxTimestamp = 4102444800000
)

// Schema is a loaded, fully resolved OCSF schema. It is immutable after
// Load and safe for concurrent use.
type Schema struct {
	dir      string
	version  string
	types    map[string]*dataType
	objects  map[string]*def
	classes  map[int]*def
	profiles map[string]bool
}

// def is a class or an object with its includes, inheritance and the
// dictionary applied.
type def struct {
	kind        string // "class" or "object"
	name        string
	caption     string
	uid         int // class_uid, for classes
	attrs       map[string]*attribute
	constraints map[string][]string
}

type attribute struct {
	name        string
	typ         string // a dictionary type (string_t, ...) or an object name
	isObject    bool
	isArray     bool
	requirement string
	enum        map[string]string // key → caption
	sibling     string
	profile     string // "" = always applies
}

// dataType is an entry of dictionary.json "types", with its supertype chain
// folded in.
type dataType struct {
	name    string
	base    string // the primitive: string_t, integer_t, long_t, float_t, boolean_t, json_t
	chain   []string
	regexes []*regexp.Regexp
	maxLen  int
	rng     *[2]float64
}

var primitives = map[string]bool{"string_t": true, "integer_t": true, "long_t": true, "float_t": true, "boolean_t": true, "json_t": true}

// SchemaDir locates the OCSF 1.7.0 schema the repository carries in
// testdata/ocsf-schema-1.7.0 (Apache-2.0, its LICENSE beside it), relative
// to the module root: the nearest directory at or above the working
// directory that holds go.mod. It returns "" when there is no module root
// or no schema there.
func SchemaDir() string {
	wd, err := os.Getwd()
	if err != nil {
		return ""
	}
	for d := wd; ; d = filepath.Dir(d) {
		if st, err := os.Stat(filepath.Join(d, "go.mod")); err == nil && !st.IsDir() {
			dir := filepath.Join(d, "testdata", "ocsf-schema-1.7.0")
			if st, err := os.Stat(filepath.Join(dir, "dictionary.json")); err == nil && !st.IsDir() {
				return dir
			}
			return ""
		}
		if filepath.Dir(d) == d {
			return ""
		}
	}
}

// Version is the schema version from version.json (e.g. "1.7.0").
func (s *Schema) Version() string { return s.version }

// Load reads and resolves every class and object of the schema in dir.
func Load(dir string) (*Schema, error) {
	if dir == "" {
		return nil, errors.New("ocsftest: no schema directory")
	}
	l := &loader{
		dir:     dir,
		objRaw:  map[string]map[string]any{},
		evRaw:   map[string]map[string]any{},
		objDone: map[string]*rawDef{},
		evDone:  map[string]*rawDef{},
		busy:    map[string]bool{},
	}
	return l.load()
}

type loader struct {
	dir     string
	dict    map[string]any
	objRaw  map[string]map[string]any
	evRaw   map[string]map[string]any
	objDone map[string]*rawDef
	evDone  map[string]*rawDef
	busy    map[string]bool
}

// rawDef is a definition with includes and inheritance merged, before the
// dictionary is applied.
type rawDef struct {
	name, caption, category string
	uid                     *int
	attrs                   map[string]map[string]any
	constraints             map[string]any
}

func (l *loader) readJSON(rel string) (map[string]any, error) {
	b, err := os.ReadFile(filepath.Join(l.dir, rel))
	if err != nil {
		return nil, fmt.Errorf("ocsftest: %w", err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("ocsftest: %s: %w", rel, err)
	}
	return m, nil
}

func (l *loader) load() (*Schema, error) {
	s := &Schema{dir: l.dir, objects: map[string]*def{}, classes: map[int]*def{}, profiles: map[string]bool{}}

	ver, err := l.readJSON("version.json")
	if err != nil {
		return nil, err
	}
	s.version, _ = ver["version"].(string)
	if s.version == "" {
		return nil, errors.New("ocsftest: version.json has no version")
	}

	dict, err := l.readJSON("dictionary.json")
	if err != nil {
		return nil, err
	}
	l.dict, _ = dict["attributes"].(map[string]any)
	types, _ := dict["types"].(map[string]any)
	typeDefs, _ := types["attributes"].(map[string]any)
	if len(l.dict) == 0 || len(typeDefs) == 0 {
		return nil, errors.New("ocsftest: dictionary.json has no attributes or types")
	}
	if s.types, err = buildTypes(typeDefs); err != nil {
		return nil, err
	}

	cats, err := l.readJSON("categories.json")
	if err != nil {
		return nil, err
	}
	catAttrs, _ := cats["attributes"].(map[string]any)

	profEntries, err := os.ReadDir(filepath.Join(l.dir, "profiles"))
	if err != nil {
		return nil, fmt.Errorf("ocsftest: %w", err)
	}
	for _, e := range profEntries {
		if strings.HasSuffix(e.Name(), ".json") {
			p, err := l.readJSON(filepath.Join("profiles", e.Name()))
			if err != nil {
				return nil, err
			}
			if n, _ := p["name"].(string); n != "" {
				s.profiles[n] = true
			}
		}
	}

	objEntries, err := os.ReadDir(filepath.Join(l.dir, "objects"))
	if err != nil {
		return nil, fmt.Errorf("ocsftest: %w", err)
	}
	for _, e := range objEntries {
		if !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		m, err := l.readJSON(filepath.Join("objects", e.Name()))
		if err != nil {
			return nil, err
		}
		n, _ := m["name"].(string)
		if n == "" {
			n = strings.TrimSuffix(e.Name(), ".json")
		}
		l.objRaw[n] = m
	}
	err = filepath.WalkDir(filepath.Join(l.dir, "events"), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".json") {
			return err
		}
		rel, _ := filepath.Rel(l.dir, p)
		m, err := l.readJSON(rel)
		if err != nil {
			return err
		}
		if n, _ := m["name"].(string); n != "" {
			l.evRaw[n] = m
		}
		return nil
	})
	if err != nil {
		return nil, err
	}

	for name := range l.objRaw {
		rd, err := l.resolve("object", name)
		if err != nil {
			return nil, err
		}
		s.objects[name] = &def{kind: "object", name: name, caption: rd.caption, constraints: toConstraints(rd.constraints)}
	}
	for name := range l.evRaw {
		rd, err := l.resolve("class", name)
		if err != nil {
			return nil, err
		}
		// Abstract category parents (e.g. "application") have no uid;
		// base_event is the concrete class 0.
		if rd.uid == nil && name != "base_event" {
			continue
		}
		catUID, catCaption := 0, "Uncategorized"
		if c, ok := catAttrs[rd.category].(map[string]any); ok {
			if n, ok := c["uid"].(float64); ok {
				catUID = int(n)
			}
			catCaption, _ = c["caption"].(string)
		}
		uid := 0
		if rd.uid != nil {
			uid = catUID*1000 + *rd.uid
		}
		if prev, dup := s.classes[uid]; dup {
			return nil, fmt.Errorf("ocsftest: class_uid %d defined by both %s and %s", uid, prev.name, name)
		}
		d := &def{kind: "class", name: name, caption: rd.caption, uid: uid, constraints: toConstraints(rd.constraints)}
		s.classes[uid] = d
		// The schema server generates the category_uid and class_uid enums
		// per class; replace the placeholders ({0: Uncategorized}, ...).
		attrs := make(map[string]map[string]any, len(rd.attrs))
		for k, a := range rd.attrs {
			attrs[k] = a
		}
		attrs["category_uid"] = withEnum(attrs["category_uid"], catUID, catCaption)
		attrs["class_uid"] = withEnum(attrs["class_uid"], uid, rd.caption)
		if d.attrs, err = l.finish(&rawDef{name: name, attrs: attrs}, s); err != nil {
			return nil, err
		}
		// type_uid is checked against class_uid and activity_id instead.
		if a := d.attrs["type_uid"]; a != nil {
			a.enum = nil
		}
	}
	for name, d := range s.objects {
		rd, _ := l.resolve("object", name)
		if d.attrs, err = l.finish(rd, s); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// withEnum returns a copy of an attribute definition whose enum is exactly
// {key: caption}.
func withEnum(a map[string]any, key int, caption string) map[string]any {
	out := merge(a, nil)
	out["enum"] = map[string]any{strconv.Itoa(key): map[string]any{"caption": caption}}
	return out
}

func buildTypes(raw map[string]any) (map[string]*dataType, error) {
	out := map[string]*dataType{}
	for name := range raw {
		dt := &dataType{name: name}
		seen := map[string]bool{}
		for t := name; t != ""; {
			if seen[t] {
				return nil, fmt.Errorf("ocsftest: type %s: cyclic supertypes", name)
			}
			seen[t] = true
			td, ok := raw[t].(map[string]any)
			if !ok {
				return nil, fmt.Errorf("ocsftest: type %s: unknown supertype %s", name, t)
			}
			dt.chain = append(dt.chain, t)
			if re, ok := td["regex"].(string); ok && re != "" {
				// A regex RE2 cannot compile is skipped rather than failing
				// the whole schema.
				if c, err := regexp.Compile(re); err == nil {
					dt.regexes = append(dt.regexes, c)
				}
			}
			if n, ok := td["max_len"].(float64); ok && dt.maxLen == 0 {
				dt.maxLen = int(n)
			}
			if r, ok := td["range"].([]any); ok && len(r) == 2 && dt.rng == nil {
				lo, ok1 := r[0].(float64)
				hi, ok2 := r[1].(float64)
				if ok1 && ok2 {
					dt.rng = &[2]float64{lo, hi}
				}
			}
			sup, _ := td["type"].(string)
			if sup == "" {
				dt.base = t
			}
			t = sup
		}
		if !primitives[dt.base] {
			return nil, fmt.Errorf("ocsftest: type %s: unknown primitive %s", name, dt.base)
		}
		out[name] = dt
	}
	return out, nil
}

// fileAttrs merges a file's `$include`s (profile attributes tagged with the
// profile name) and then its own attributes.
func (l *loader) fileAttrs(raw map[string]any, depth int) (map[string]map[string]any, error) {
	if depth > 8 {
		return nil, errors.New("ocsftest: $include nested too deeply")
	}
	out := map[string]map[string]any{}
	attrs, _ := raw["attributes"].(map[string]any)
	if inc, ok := attrs["$include"]; ok {
		var files []string
		switch v := inc.(type) {
		case string:
			files = []string{v}
		case []any:
			for _, f := range v {
				if s, ok := f.(string); ok {
					files = append(files, s)
				}
			}
		}
		for _, f := range files {
			incRaw, err := l.readJSON(filepath.FromSlash(f))
			if err != nil {
				return nil, err
			}
			incAttrs, err := l.fileAttrs(incRaw, depth+1)
			if err != nil {
				return nil, err
			}
			profile := ""
			if incRaw["meta"] == "profile" || strings.HasPrefix(f, "profiles/") {
				profile, _ = incRaw["name"].(string)
			}
			for k, a := range incAttrs {
				a = merge(nil, a)
				if _, has := a["profile"]; !has && profile != "" {
					a["profile"] = profile
				}
				out[k] = merge(out[k], a)
			}
		}
	}
	for k, v := range attrs {
		if k == "$include" {
			continue
		}
		m, ok := v.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("ocsftest: %v: attribute %s is not an object", raw["name"], k)
		}
		out[k] = merge(out[k], m)
	}
	return out, nil
}

func (l *loader) resolve(kind, name string) (*rawDef, error) {
	done, raws := l.objDone, l.objRaw
	if kind == "class" {
		done, raws = l.evDone, l.evRaw
	}
	if d, ok := done[name]; ok {
		return d, nil
	}
	raw, ok := raws[name]
	if !ok {
		return nil, fmt.Errorf("ocsftest: %s %q not found", kind, name)
	}
	key := kind + ":" + name
	if l.busy[key] {
		return nil, fmt.Errorf("ocsftest: %s %q extends itself", kind, name)
	}
	l.busy[key] = true
	defer delete(l.busy, key)

	own, err := l.fileAttrs(raw, 0)
	if err != nil {
		return nil, err
	}
	rd := &rawDef{name: name, attrs: map[string]map[string]any{}, constraints: map[string]any{}}
	if ext, _ := raw["extends"].(string); ext != "" && ext != name {
		p, err := l.resolve(kind, ext)
		if err != nil {
			return nil, fmt.Errorf("ocsftest: %s %s extends %s: %w", kind, name, ext, err)
		}
		for k, a := range p.attrs {
			rd.attrs[k] = merge(nil, a)
		}
		for k, c := range p.constraints {
			rd.constraints[k] = c
		}
		rd.category = p.category
		rd.caption = p.caption
	}
	for k, a := range own {
		rd.attrs[k] = merge(rd.attrs[k], a)
	}
	if c, ok := raw["constraints"].(map[string]any); ok {
		for k, v := range c {
			rd.constraints[k] = v
		}
	}
	if c, _ := raw["category"].(string); c != "" {
		rd.category = c
	}
	if c, _ := raw["caption"].(string); c != "" {
		rd.caption = c
	}
	if n, ok := raw["uid"].(float64); ok {
		u := int(n)
		rd.uid = &u
	}
	done[name] = rd
	return rd, nil
}

// finish applies the dictionary under each attribute and types it.
func (l *loader) finish(rd *rawDef, s *Schema) (map[string]*attribute, error) {
	out := map[string]*attribute{}
	for name, a := range rd.attrs {
		d, ok := l.dict[name].(map[string]any)
		if !ok {
			return nil, fmt.Errorf("ocsftest: %s.%s is not in dictionary.json", rd.name, name)
		}
		m := merge(d, a)
		at := &attribute{name: name}
		at.typ, _ = m["type"].(string)
		if at.typ == "object_t" {
			at.typ, _ = m["object_type"].(string)
		}
		switch {
		case s.types[at.typ] != nil:
		case s.objects[at.typ] != nil:
			at.isObject = true
		default:
			return nil, fmt.Errorf("ocsftest: %s.%s has unknown type %q", rd.name, name, at.typ)
		}
		at.isArray, _ = m["is_array"].(bool)
		at.requirement, _ = m["requirement"].(string)
		at.sibling, _ = m["sibling"].(string)
		at.profile, _ = m["profile"].(string)
		if e, ok := m["enum"].(map[string]any); ok && len(e) > 0 {
			at.enum = map[string]string{}
			for k, v := range e {
				vm, _ := v.(map[string]any)
				at.enum[k], _ = vm["caption"].(string)
			}
		}
		out[name] = at
	}
	// The naming convention xxx_id → xxx where the dictionary names no sibling.
	for name, at := range out {
		if at.sibling == "" && at.enum != nil && strings.HasSuffix(name, "_id") {
			if _, ok := out[strings.TrimSuffix(name, "_id")]; ok {
				at.sibling = strings.TrimSuffix(name, "_id")
			}
		}
	}
	return out, nil
}

func toConstraints(raw map[string]any) map[string][]string {
	out := map[string][]string{}
	for k, v := range raw {
		list, _ := v.([]any)
		names := []string{}
		for _, n := range list {
			if s, ok := n.(string); ok {
				names = append(names, s)
			}
		}
		out[k] = names
	}
	return out
}

// merge deep-merges over onto a copy of base: nested objects merge, every
// other value (including an explicit null) replaces.
func merge(base, over map[string]any) map[string]any {
	out := make(map[string]any, len(base)+len(over))
	for k, v := range base {
		if m, ok := v.(map[string]any); ok {
			v = merge(nil, m)
		}
		out[k] = v
	}
	for k, v := range over {
		om, ok1 := v.(map[string]any)
		bm, ok2 := out[k].(map[string]any)
		switch {
		case ok1 && ok2:
			out[k] = merge(bm, om)
		case ok1:
			out[k] = merge(nil, om)
		default:
			out[k] = v
		}
	}
	return out
}

// RequiredAttributes lists (sorted) the attributes the schema marks
// "required" for the class classUID, or, with a dotted path such as
// "actor.user" or "resources", for the object at that path (array
// attributes are stepped through). No profile is assumed active.
func (s *Schema) RequiredAttributes(classUID int, path string) ([]string, error) {
	d, ok := s.classes[classUID]
	if !ok {
		return nil, fmt.Errorf("ocsftest: no class %d", classUID)
	}
	if path != "" {
		for _, p := range strings.Split(path, ".") {
			a, ok := d.attrs[p]
			if !ok || a.profile != "" || !a.isObject {
				return nil, fmt.Errorf("ocsftest: %s is not an object attribute of %s", p, d.name)
			}
			d = s.objects[a.typ]
		}
	}
	var out []string
	for n, a := range d.attrs {
		if a.requirement == "required" && a.profile == "" {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out, nil
}

// ValidateJSON validates one JSON-encoded event. Prefer it over
// ValidateEvent for serialized events: numbers keep their literal form, so
// 1.0 is reported where an integer is required.
func (s *Schema) ValidateJSON(data []byte) []string {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var ev map[string]any
	if err := dec.Decode(&ev); err != nil {
		return []string{"event: not a JSON object: " + err.Error()}
	}
	if dec.More() {
		return []string{"event: trailing data after the JSON object"}
	}
	if ev == nil {
		return []string{"event: null"}
	}
	return s.validate(ev)
}

// ValidateEvent returns the event's violations of the schema, sorted, each
// starting with the attribute path; empty means valid. The event may hold
// any JSON-encodable Go values (maps, slices, structs, json.Number, ints,
// floats); it is re-encoded to JSON first, so a float64 with a fraction
// (1.5) is not an integer, while a whole float64 (1.0, as json.Unmarshal
// produces for 1) is.
func (s *Schema) ValidateEvent(event map[string]any) []string {
	if event == nil {
		return []string{"event: nil"}
	}
	b, err := json.Marshal(event)
	if err != nil {
		return []string{"event: not JSON-encodable: " + err.Error()}
	}
	return s.ValidateJSON(b)
}

func (s *Schema) validate(ev map[string]any) []string {

	c := &checker{s: s, profiles: map[string]bool{}}
	cu, present := ev["class_uid"]
	if !present || cu == nil {
		return []string{"class_uid: required attribute is missing or null; the class cannot be resolved"}
	}
	uid, ok := intValue(cu)
	if !ok {
		return []string{fmt.Sprintf("class_uid: must be an integer, got %s; the class cannot be resolved", describe(cu))}
	}
	cls, ok := s.classes[int(uid)]
	if !ok {
		return []string{fmt.Sprintf("class_uid: no class %d in OCSF %s", uid, s.version)}
	}

	if md, ok := ev["metadata"].(map[string]any); ok {
		if list, ok := md["profiles"].([]any); ok {
			for i, p := range list {
				if name, ok := p.(string); ok {
					if !s.profiles[name] {
						c.addf(fmt.Sprintf("metadata.profiles[%d]", i), "unknown profile %q", name)
					}
					c.profiles[name] = true
				}
			}
		}
		if v, ok := md["version"].(string); ok && v != s.version {
			c.addf("metadata.version", "must be %q (the schema version), got %q", s.version, v)
		}
	}

	c.object("", ev, cls)

	// type_uid = class_uid*100 + activity_id, type_name its caption.
	act, okA := intValue(ev["activity_id"])
	tu, okT := intValue(ev["type_uid"])
	if okA && okT && tu != uid*100+act {
		c.addf("type_uid", "%d is not class_uid*100 + activity_id = %d", tu, uid*100+act)
	} else if actAttr := cls.attrs["activity_id"]; okT && actAttr != nil && tu/100 == uid && tu%100 != 99 {
		if actCap, ok := actAttr.enum[strconv.FormatInt(tu%100, 10)]; ok {
			want := cls.caption + ": " + actCap
			if tn, ok := ev["type_name"].(string); ok && tn != want {
				c.addf("type_name", "%q does not match the caption %q of type_uid %d", tn, want, tu)
			}
		}
	}

	sort.Strings(c.out)
	return dedupe(c.out)
}

type checker struct {
	s        *Schema
	profiles map[string]bool
	out      []string
}

func (c *checker) addf(path, format string, args ...any) {
	if path == "" {
		path = "event"
	}
	c.out = append(c.out, path+": "+fmt.Sprintf(format, args...))
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

func (c *checker) active(a *attribute) bool { return a.profile == "" || c.profiles[a.profile] }

func (c *checker) object(path string, obj map[string]any, d *def) {
	if len(d.attrs) == 0 {
		return // the open "object" type (unmapped, xattributes): anything goes
	}
	for _, n := range sortedKeys(d.attrs) {
		a := d.attrs[n]
		if a.requirement == "required" && c.active(a) && obj[n] == nil {
			c.addf(join(path, n), "required attribute is missing or null (%s %s)", d.kind, d.name)
		}
	}
	for _, kind := range sortedKeys(d.constraints) {
		names := d.constraints[kind]
		n := 0
		for _, k := range names {
			if obj[k] != nil {
				n++
			}
		}
		switch kind {
		case "at_least_one":
			if n == 0 {
				c.addf(path, "%s %s needs at least one of %s", d.kind, d.name, strings.Join(names, ", "))
			}
		case "just_one":
			if n != 1 {
				c.addf(path, "%s %s needs exactly one of %s, has %d", d.kind, d.name, strings.Join(names, ", "), n)
			}
		default:
			c.addf(path, "schema: unknown constraint %q on %s %s", kind, d.kind, d.name)
		}
	}
	for _, k := range sortedKeys(obj) {
		v := obj[k]
		p := join(path, k)
		a, ok := d.attrs[k]
		if !ok {
			// The datetime profile adds <x>_dt (datetime_t) beside every
			// timestamp_t attribute <x>.
			if base, ok := d.attrs[strings.TrimSuffix(k, "_dt")]; ok && strings.HasSuffix(k, "_dt") &&
				c.active(base) && base.typ == "timestamp_t" && c.profiles["datetime"] {
				if v != nil {
					c.value(p, v, &attribute{name: k, typ: "datetime_t", isArray: base.isArray})
				}
				continue
			}
			c.addf(p, "unknown attribute (not defined in %s %s)", d.kind, d.name)
			continue
		}
		if !c.active(a) {
			c.addf(p, "attribute of profile %q, which metadata.profiles does not declare", a.profile)
			continue
		}
		if v != nil {
			c.value(p, v, a)
		}
	}
	// Sibling captions: activity_id → activity_name, severity_id → severity, ...
	for _, n := range sortedKeys(d.attrs) {
		a := d.attrs[n]
		if a.enum == nil || a.sibling == "" || a.isArray || !c.active(a) {
			continue
		}
		key, ok := enumKey(obj[n])
		if !ok || key == "99" {
			continue
		}
		want, ok := a.enum[key]
		if !ok {
			continue // reported as a bad enum value
		}
		if got, ok := obj[a.sibling].(string); ok && got != want {
			c.addf(join(path, a.sibling), "%q does not match the caption %q of %s %s", got, want, n, key)
		}
	}
}

func (c *checker) value(path string, v any, a *attribute) {
	if !a.isArray {
		if _, isList := v.([]any); isList {
			c.addf(path, "must be a single %s, got an array", a.typ)
			return
		}
		c.element(path, v, a)
		return
	}
	list, ok := v.([]any)
	if !ok {
		c.addf(path, "must be an array of %s, got %s", a.typ, describe(v))
		return
	}
	for i, el := range list {
		c.element(fmt.Sprintf("%s[%d]", path, i), el, a)
	}
}

func (c *checker) element(path string, v any, a *attribute) {
	if v == nil {
		c.addf(path, "must be %s, got null", a.typ)
		return
	}
	if a.isObject {
		m, ok := v.(map[string]any)
		if !ok {
			c.addf(path, "must be a %s object, got %s", a.typ, describe(v))
			return
		}
		c.object(path, m, c.s.objects[a.typ])
		return
	}
	dt := c.s.types[a.typ]
	typ := a.typ
	if dt.base != a.typ {
		typ = fmt.Sprintf("%s (%s)", a.typ, dt.base)
	}
	switch dt.base {
	case "json_t":
		return
	case "string_t":
		str, ok := v.(string)
		if !ok {
			c.addf(path, "must be %s, got %s", typ, describe(v))
			return
		}
		if dt.maxLen > 0 && utf8.RuneCountInString(str) > dt.maxLen {
			c.addf(path, "longer than %d characters (%s)", dt.maxLen, a.typ)
		}
		for _, re := range dt.regexes {
			if !re.MatchString(str) {
				c.addf(path, "%q is not a valid %s", str, a.typ)
				break
			}
		}
	case "integer_t", "long_t":
		n, ok := v.(json.Number)
		if !ok || !isIntLiteral(n) {
			c.addf(path, "must be %s (a JSON number without fraction), got %s", typ, describe(v))
			return
		}
		i, err := n.Int64()
		if err != nil {
			if dt.base == "integer_t" || a.typ == "timestamp_t" {
				c.addf(path, "%s is out of range for %s", n, typ)
			}
			return
		}
		if dt.rng != nil && (float64(i) < dt.rng[0] || float64(i) > dt.rng[1]) {
			c.addf(path, "%d is outside the %s range %v..%v", i, a.typ, dt.rng[0], dt.rng[1])
		}
		for _, t := range dt.chain {
			if t == "timestamp_t" && (i < minTimestamp || i >= maxTimestamp) {
				c.addf(path, "%d is not epoch milliseconds between 2000-01-01 and 2100-01-01", i)
			}
		}
	case "float_t":
		n, ok := v.(json.Number)
		if !ok {
			c.addf(path, "must be %s, got %s", typ, describe(v))
			return
		}
		if f, err := n.Float64(); err == nil && dt.rng != nil && (f < dt.rng[0] || f > dt.rng[1]) {
			c.addf(path, "%v is outside the %s range %v..%v", f, a.typ, dt.rng[0], dt.rng[1])
		}
	case "boolean_t":
		if _, ok := v.(bool); !ok {
			c.addf(path, "must be %s, got %s", typ, describe(v))
			return
		}
	}
	if a.enum != nil {
		key, ok := enumKey(v)
		if _, in := a.enum[key]; !ok || !in {
			c.addf(path, "%s is not in the enum of %s (%s)", describeValue(v), a.name, enumList(a.enum))
		}
	}
}

func enumKey(v any) (string, bool) {
	switch x := v.(type) {
	case json.Number:
		if isIntLiteral(x) {
			return x.String(), true
		}
	case string:
		return x, true
	}
	return "", false
}

func enumList(e map[string]string) string {
	keys := make([]string, 0, len(e))
	for k := range e {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		a, errA := strconv.Atoi(keys[i])
		b, errB := strconv.Atoi(keys[j])
		if errA == nil && errB == nil {
			return a < b
		}
		return keys[i] < keys[j]
	})
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + " " + e[k]
		if _, err := strconv.Atoi(k); err != nil {
			parts[i] = k
		}
	}
	return strings.Join(parts, ", ")
}

func isIntLiteral(n json.Number) bool {
	return n != "" && !strings.ContainsAny(string(n), ".eE")
}

func intValue(v any) (int64, bool) {
	n, ok := v.(json.Number)
	if !ok || !isIntLiteral(n) {
		return 0, false
	}
	i, err := n.Int64()
	return i, err == nil
}

func describe(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case string:
		return fmt.Sprintf("string %q", x)
	case bool:
		return fmt.Sprintf("boolean %v", x)
	case json.Number:
		if isIntLiteral(x) {
			return "integer " + x.String()
		}
		return "number " + x.String()
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}

func describeValue(v any) string {
	if s, ok := v.(string); ok {
		return strconv.Quote(s)
	}
	return fmt.Sprint(v)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func dedupe(in []string) []string {
	out := in[:0]
	for i, s := range in {
		if i == 0 || s != in[i-1] {
			out = append(out, s)
		}
	}
	return out
}
