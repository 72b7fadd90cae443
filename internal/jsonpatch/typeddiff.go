package jsonpatch

import (
	"bytes"
	"encoding"
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"
	"unsafe"
)

// mergeTypedChanges writes into dst what mergeChanges(dst, render(before), render(after), at) would
// write, where render is the object's JSON tree (toJSONMap), without rendering the whole object
// twice. before and after are pointers to the same struct type; after is a defaulted deep copy of
// before, so nearly all of it is equal.
//
// It walks both values member by member as encoding/json would render them (json tags, omitempty,
// omitzero, embedded structs flattened) and skips every member that is equal in both (equal Go
// values render to equal JSON, so mergeChanges would find nothing there). Only members that differ
// are rendered, with toJSONValue, and handed to mergeChanges at their path. Wherever the walk
// cannot be sure it reproduces encoding/json exactly (a custom marshaler, an embedded pointer, a
// ",string" option, a name clash, a map, list or other non-struct value), it renders that value
// whole and lets mergeChanges compare the two trees. FuzzTypedChanges checks the equivalence.
func mergeTypedChanges(dst *tree, before, after any, at []step) error {
	return mergeTypedValue(dst, reflect.ValueOf(before), reflect.ValueOf(after), at)
}

// mergeTypedValue handles two values of one type that are both present (rendered) at path at.
// Structs are walked member by member without comparing them whole first, so every part of the
// object is compared once; other values are compared with reflect.DeepEqual and rendered only when
// they differ.
func mergeTypedValue(dst *tree, b, a reflect.Value, at []step) error {
	// Look through non-nil pointers: a pointer renders as what it points to.
	for b.Kind() == reflect.Pointer && !b.IsNil() && !a.IsNil() && !typeInfoOf(b.Type()).marshaler {
		b, a = b.Elem(), a.Elem()
	}
	fields := typeInfoOf(b.Type()).fields
	if fields == nil {
		if equalValues(b, a) {
			return nil
		}
		return mergeRendered(dst, b, a, at)
	}
	p, last := withStep(at)
	checked := len(at) == 0
	// Fields whose memory is the same in both structs hold the same value (the same scalars, the same
	// string data, the same pointers), so they render the same: one comparison of bytes skips them.
	// A deep copy shares its strings, so only the fields it had to copy (pointers, slices, maps) and
	// the fields the defaults engine wrote are left to the walk below.
	var pb, pa unsafe.Pointer
	if b.CanAddr() && a.CanAddr() {
		pb, pa = b.Addr().UnsafePointer(), a.Addr().UnsafePointer()
	}
	for _, f := range fields {
		if pb != nil && sameMemory(unsafe.Add(pb, f.offset), unsafe.Add(pa, f.offset), f.size) {
			continue
		}
		bf, inB := f.value(b)
		af, inA := f.value(a)
		if inA == inB && (!inA || equalLeaf(bf, af)) {
			continue
		}
		if !checked {
			// mergeChanges descends into two objects only where dst holds an object at that path
			// (or nothing); elsewhere it writes the whole rendered value. Nothing was written yet.
			if !isMapAt(dst, at) {
				return mergeRendered(dst, b, a, at)
			}
			checked = true
		}
		p[last] = step{key: f.name}
		switch {
		case inA && inB:
			if err := mergeTypedValue(dst, bf, af, p); err != nil {
				return err
			}
		case inA: // only after has the member: added whole
			v, err := toJSONValue(af)
			if err != nil {
				return err
			}
			set(dst, p, v)
		default: // only before has it: removed
			remove(dst, p)
		}
	}
	return nil
}

// equalLeaf reports cheaply that two scalar values are equal; anything else is left to the walk.
func equalLeaf(b, a reflect.Value) bool {
	switch b.Kind() {
	case reflect.String:
		return b.String() == a.String()
	case reflect.Bool:
		return b.Bool() == a.Bool()
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return b.Int() == a.Int()
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return b.Uint() == a.Uint()
	}
	return false
}

// mergeRendered renders both values and merges the differences of the trees.
func mergeRendered(dst *tree, b, a reflect.Value, at []step) error {
	bv, err := toJSONValue(b)
	if err != nil {
		return err
	}
	av, err := toJSONValue(a)
	if err != nil {
		return err
	}
	mergeChanges(dst, bv, av, at)
	return nil
}

// toJSONValue renders v as a generic JSON tree (json.Number numbers), as toJSONMap does. Plain
// strings, booleans and integers, the usual defaulted values, are converted without encoding.
func toJSONValue(v reflect.Value) (any, error) {
	if !typeInfoOf(v.Type()).marshaler {
		switch v.Kind() {
		case reflect.String:
			if s := v.String(); utf8.ValidString(s) { // encoding/json replaces invalid bytes
				return s, nil
			}
		case reflect.Bool:
			return v.Bool(), nil
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			return json.Number(strconv.FormatInt(v.Int(), 10)), nil
		case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			return json.Number(strconv.FormatUint(v.Uint(), 10)), nil
		case reflect.Map: // annotations and labels; string-kind keys are written as they are
			if m, ok := stringMapValue(v); ok {
				return m, nil
			}
		case reflect.Pointer: // a pointer renders as null or as what it points to
			if v.IsNil() {
				return nil, nil
			}
			return toJSONValue(v.Elem())
		case reflect.Struct: // members as mergeTypedValue walks them (json tags, omitempty, inline)
			if fields := typeInfoOf(v.Type()).fields; fields != nil {
				m := make(map[string]any, len(fields))
				for _, f := range fields {
					fv, present := f.value(v)
					if !present {
						continue
					}
					e, err := toJSONValue(fv)
					if err != nil {
						return nil, err
					}
					m[f.name] = e
				}
				return m, nil
			}
		case reflect.Slice: // lists of anything but bytes (encoding/json writes []byte as base64)
			if v.Type().Elem().Kind() != reflect.Uint8 {
				if v.IsNil() {
					return nil, nil
				}
				l := make([]any, v.Len())
				for i := range l {
					e, err := toJSONValue(v.Index(i))
					if err != nil {
						return nil, err
					}
					l[i] = e
				}
				return l, nil
			}
		}
	}
	if v.CanAddr() {
		v = v.Addr() // renders the same, and boxing a pointer does not copy the value
	}
	raw, err := json.Marshal(v.Interface())
	if err != nil {
		return nil, err
	}
	t := jsonTree{data: raw}
	return t.value(), nil
}

// stringMapValue renders a map of string kinds with valid UTF-8 (ok false otherwise).
func stringMapValue(v reflect.Value) (any, bool) {
	t := v.Type()
	if t.Key().Kind() != reflect.String || t.Elem().Kind() != reflect.String || typeInfoOf(t.Elem()).marshaler {
		return nil, false
	}
	if v.IsNil() {
		return nil, true // null
	}
	m := make(map[string]any, v.Len())
	for it := v.MapRange(); it.Next(); {
		k, e := it.Key().String(), it.Value().String()
		if !utf8.ValidString(k) || !utf8.ValidString(e) {
			return nil, false
		}
		m[k] = e
	}
	return m, true
}

// equalValues is reflect.DeepEqual of two values of one type, compared through their addresses
// where they have one so no large value is copied into an interface.
func equalValues(b, a reflect.Value) bool {
	if equalLeaf(b, a) {
		return true
	}
	if b.CanAddr() && a.CanAddr() {
		return reflect.DeepEqual(b.Addr().Interface(), a.Addr().Interface())
	}
	return reflect.DeepEqual(b.Interface(), a.Interface())
}

// sameMemory reports whether n bytes at p and q are equal.
func sameMemory(p, q unsafe.Pointer, n uintptr) bool {
	return p == q || bytes.Equal(unsafe.Slice((*byte)(p), n), unsafe.Slice((*byte)(q), n))
}

// jsonField is one member encoding/json writes for a struct: its name, where the Go field is (an
// index path through embedded structs, and its offset and size in the outer struct) and whether it
// is left out when empty.
type jsonField struct {
	name      string
	index     []int
	offset    uintptr
	size      uintptr
	omitEmpty bool
	omitZero  bool
	isZero    func(reflect.Value) bool // omitzero through the type's IsZero method; nil: reflect's IsZero
}

// value is the field's value in struct v, and whether encoding/json writes the member at all.
func (f jsonField) value(v reflect.Value) (reflect.Value, bool) {
	fv := v.FieldByIndex(f.index) // embedded structs are never pointers here (see collectFields)
	if f.omitEmpty && isEmptyJSONValue(fv) {
		return fv, false
	}
	if f.omitZero && (f.isZero == nil && fv.IsZero() || f.isZero != nil && f.isZero(fv)) {
		return fv, false
	}
	return fv, true
}

// isEmptyJSONValue is encoding/json's isEmptyValue: what omitempty leaves out.
func isEmptyJSONValue(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Array, reflect.Map, reflect.Slice, reflect.String:
		return v.Len() == 0
	case reflect.Bool, reflect.Float32, reflect.Float64, reflect.Int, reflect.Int8, reflect.Int16,
		reflect.Int32, reflect.Int64, reflect.Interface, reflect.Pointer, reflect.Uint, reflect.Uint8,
		reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return v.IsZero()
	}
	return false
}

// typeInfo is what the walk needs to know about a type, computed once per type.
type typeInfo struct {
	marshaler bool        // t or *t renders itself (hasMarshaler)
	fields    []jsonField // structFields; nil: render values of t whole
}

var typeCache sync.Map // reflect.Type -> *typeInfo

func typeInfoOf(t reflect.Type) *typeInfo {
	if c, ok := typeCache.Load(t); ok {
		return c.(*typeInfo)
	}
	info := &typeInfo{marshaler: hasMarshaler(t), fields: structFields(t)}
	typeCache.Store(t, info)
	return info
}

// structFields lists the members encoding/json writes for values of type t, in its order, or nil
// when t is not a struct the walk can follow exactly (then the value is rendered whole).
func structFields(t reflect.Type) []jsonField {
	var fields []jsonField
	if t.Kind() == reflect.Struct && !hasMarshaler(t) {
		var ok bool
		fields, ok = collectFields(t, nil, 0, nil)
		seen := map[string]bool{}
		for _, f := range fields {
			if seen[f.name] { // encoding/json's dominance rules decide: not followed here
				ok = false
			}
			seen[f.name] = true
		}
		if !ok || len(fields) == 0 {
			fields = nil
		}
	}
	return fields
}

// collectFields appends t's members to out; ok is false when t has a field the walk does not follow.
func collectFields(t reflect.Type, index []int, offset uintptr, out []jsonField) ([]jsonField, bool) {
	for i := 0; i < t.NumField(); i++ {
		sf := t.Field(i)
		tag := sf.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		idx := append(append([]int(nil), index...), i)
		if sf.Anonymous && name == "" {
			// An embedded struct's members are written as the outer struct's own (TypeMeta,
			// `json:",inline"`). Embedded pointers, non-structs and marshalers: not followed.
			if sf.Type.Kind() != reflect.Struct || hasMarshaler(sf.Type) || !sf.IsExported() || opts != "" && opts != "inline" {
				return nil, false
			}
			var ok bool
			if out, ok = collectFields(sf.Type, idx, offset+sf.Offset, out); !ok {
				return nil, false
			}
			continue
		}
		if !sf.IsExported() {
			continue
		}
		f := jsonField{name: name, index: idx, offset: offset + sf.Offset, size: sf.Type.Size()}
		for o := range strings.SplitSeq(opts, ",") {
			switch o {
			case "":
			case "omitempty":
				f.omitEmpty = true
			case "omitzero":
				f.omitZero, f.isZero = true, zeroFunc(sf.Type)
			default: // ",string" and the like: not followed
				return nil, false
			}
		}
		if f.name == "" {
			f.name = sf.Name
		}
		out = append(out, f)
	}
	return out, true
}

type isZeroer interface{ IsZero() bool }

// zeroFunc is how encoding/json decides omitzero for a field of type t when t has an IsZero method
// (metav1.Time); nil when it has none and reflect.Value.IsZero decides.
func zeroFunc(t reflect.Type) func(reflect.Value) bool {
	switch {
	case t.Kind() == reflect.Interface && t.Implements(isZeroerType):
		return func(v reflect.Value) bool {
			return v.IsNil() || v.Elem().Kind() == reflect.Pointer && v.Elem().IsNil() || v.Interface().(isZeroer).IsZero()
		}
	case t.Kind() == reflect.Pointer && t.Implements(isZeroerType):
		return func(v reflect.Value) bool { return v.IsNil() || v.Interface().(isZeroer).IsZero() }
	case t.Implements(isZeroerType):
		return func(v reflect.Value) bool { return v.Interface().(isZeroer).IsZero() }
	case reflect.PointerTo(t).Implements(isZeroerType):
		return func(v reflect.Value) bool {
			if !v.CanAddr() {
				v2 := reflect.New(v.Type()).Elem()
				v2.Set(v)
				v = v2
			}
			return v.Addr().Interface().(isZeroer).IsZero()
		}
	}
	return nil
}

var (
	isZeroerType      = reflect.TypeFor[isZeroer]()
	jsonMarshalerType = reflect.TypeFor[json.Marshaler]()
	textMarshalerType = reflect.TypeFor[encoding.TextMarshaler]()
)

// hasMarshaler reports whether t or *t renders itself (metav1.Time, resource.Quantity, ...).
func hasMarshaler(t reflect.Type) bool {
	pt := reflect.PointerTo(t)
	return t.Implements(jsonMarshalerType) || t.Implements(textMarshalerType) ||
		pt.Implements(jsonMarshalerType) || pt.Implements(textMarshalerType)
}
