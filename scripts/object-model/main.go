// Command object-model writes Portcullis's table of built-in Kubernetes schemas
// (src/kubernetes/schema/builtin.json) from two pinned sources:
//
//   - the kube-apiserver's OpenAPI v3 documents in k8s.io/kubernetes@v1.37.2
//     (api/openapi-spec/v3), for field types, list types and keys, map types,
//     atomic structs, enums, embedded resources and preserve-unknown-fields;
//   - the Go types of k8s.io/api v0.37.2 (and apiextensions, apiregistration),
//     by reflection, for what OpenAPI does not say: each field's Go type as
//     encoding/json names it in errors, and its omitempty/omitzero/pointer-ness.
//
// Run it through `make schemas`. The output is deterministic: the same inputs
// give the same bytes, which the Rust drift test relies on.
package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
)

const kubernetesModule = "k8s.io/kubernetes@v1.37.2"

// node is the shape of one value: a field's, a list item's or a map value's.
type node struct {
	// K is the JSON-level kind: string, integer, number, boolean, bytes,
	// object, map, list, int-or-string, quantity, time, raw.
	K string `json:"k"`
	// Go is the Go type as encoding/json prints it in an UnmarshalTypeError.
	Go string `json:"go"`
	// R is the index of the struct in types, for K == object.
	R *int `json:"r,omitempty"`
	// I is the item shape of a list; V the value shape of a map.
	I *node `json:"i,omitempty"`
	V *node `json:"v,omitempty"`
	// LT is x-kubernetes-list-type, LK x-kubernetes-list-map-keys.
	LT string   `json:"lt,omitempty"`
	LK []string `json:"lk,omitempty"`
	// MT is x-kubernetes-map-type of a map-typed field.
	MT string `json:"mt,omitempty"`
	// GK is the Go kind of an integer (int32, int64 …), for its range.
	GK string `json:"gk,omitempty"`
}

type field struct {
	N  string `json:"n"`
	T  *node  `json:"t"`
	OE bool   `json:"oe,omitempty"`
	OZ bool   `json:"oz,omitempty"`
	P  bool   `json:"p,omitempty"`
	// E is the enum of allowed values, where OpenAPI gives one.
	E   []any `json:"e,omitempty"`
	PU  bool  `json:"pu,omitempty"`
	EMB bool  `json:"emb,omitempty"`
	// IN lists the Go names of the inline embedded structs the field is reached through
	// (ProbeHandler for a Probe's httpGet), which decode errors print in the field path.
	IN []string `json:"in,omitempty"`
	// D is the field's scalar default, where OpenAPI gives one.
	D any `json:"d,omitempty"`
}

type structType struct {
	N  string   `json:"n"`
	Go string   `json:"go"`
	A  bool     `json:"a,omitempty"`
	PU bool     `json:"pu,omitempty"`
	F  []*field `json:"f"`
}

type kindEntry struct {
	Group, Version, Kind string
	Type                 int
}

type generator struct {
	defs  map[string]map[string]any
	types []*structType
	index map[reflect.Type]int
}

var jsonUnmarshaler = reflect.TypeOf((*json.Unmarshaler)(nil)).Elem()

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "object-model:", err)
		os.Exit(1)
	}
}

func run() error {
	outDir := flag.String("out", "", "write builtin.json and builtin.lock into this folder (default: the table to stdout)")
	flag.Parse()
	dir, err := moduleDir(kubernetesModule)
	if err != nil {
		return err
	}
	specDir := filepath.Join(dir, "api", "openapi-spec", "v3")
	files, err := filepath.Glob(filepath.Join(specDir, "*.json"))
	if err != nil {
		return err
	}
	sort.Strings(files)
	g := &generator{defs: map[string]map[string]any{}, index: map[reflect.Type]int{}}
	var inputs []string
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(data)
		inputs = append(inputs, fmt.Sprintf("%s %s", hex.EncodeToString(sum[:]), filepath.Base(file)))
		var doc struct {
			Components struct {
				Schemas map[string]map[string]any `json:"schemas"`
			} `json:"components"`
		}
		if err := json.Unmarshal(data, &doc); err != nil {
			return fmt.Errorf("%s: %w", file, err)
		}
		for name, def := range doc.Components.Schemas {
			g.defs[name] = def
		}
	}

	s := runtime.NewScheme()
	if err := scheme.AddToScheme(s); err != nil {
		return err
	}
	if err := apiextensionsv1.AddToScheme(s); err != nil {
		return err
	}
	if err := apiregistrationv1.AddToScheme(s); err != nil {
		return err
	}
	known := s.AllKnownTypes()

	var kinds []kindEntry
	names := make([]string, 0, len(g.defs))
	for name := range g.defs {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		def := g.defs[name]
		gvks, _ := def["x-kubernetes-group-version-kind"].([]any)
		for _, raw := range gvks {
			m := raw.(map[string]any)
			gvk := schema.GroupVersionKind{Group: m["group"].(string), Version: m["version"].(string), Kind: m["kind"].(string)}
			t, ok := known[gvk]
			if !ok || openAPIName(t) != name {
				// meta/v1 kinds (Status, DeleteOptions, WatchEvent …) are listed
				// under every group; they are not objects of that group.
				continue
			}
			idx, err := g.structIndex(t)
			if err != nil {
				return fmt.Errorf("%s: %w", gvk, err)
			}
			kinds = append(kinds, kindEntry{gvk.Group, gvk.Version, gvk.Kind, idx})
		}
	}
	sort.Slice(kinds, func(i, j int) bool {
		a, b := kinds[i], kinds[j]
		if a.Group != b.Group {
			return a.Group < b.Group
		}
		if a.Version != b.Version {
			return a.Version < b.Version
		}
		return a.Kind < b.Kind
	})

	var out strings.Builder
	out.WriteString("{\"source\":")
	writeJSON(&out, kubernetesModule+" api/openapi-spec/v3; Go types of k8s.io/api, k8s.io/apiextensions-apiserver, k8s.io/kube-aggregator v0.37.2")
	out.WriteString(",\n\"inputs\":[\n")
	for i, input := range inputs {
		if i > 0 {
			out.WriteString(",\n")
		}
		writeJSON(&out, input)
	}
	out.WriteString("],\n\"kinds\":[\n")
	for i, k := range kinds {
		if i > 0 {
			out.WriteString(",\n")
		}
		writeJSON(&out, []any{k.Group, k.Version, k.Kind, k.Type})
	}
	out.WriteString("],\n\"types\":[\n")
	for i, t := range g.types {
		if i > 0 {
			out.WriteString(",\n")
		}
		writeJSON(&out, t)
	}
	out.WriteString("]}\n")
	if *outDir == "" {
		_, err = os.Stdout.WriteString(out.String())
		return err
	}
	table := []byte(out.String())
	generator, err := generatorDigest()
	if err != nil {
		return err
	}
	tableSum := sha256.Sum256(table)
	lock := "# Written by `make schemas` (scripts/object-model); checked by src/kubernetes/schema/tests.rs.\n" +
		"generator " + generator + "\n" +
		"table " + hex.EncodeToString(tableSum[:]) + "\n"
	if err := os.WriteFile(filepath.Join(*outDir, "builtin.json"), table, 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(*outDir, "builtin.lock"), []byte(lock), 0o644)
}

// generatorFiles are the files whose bytes make the generator digest, in order.
var generatorFiles = []string{"go.mod", "go.sum", "main.go"}

// generatorDigest is the SHA-256 of the generator's files concatenated, run from its folder.
func generatorDigest() (string, error) {
	h := sha256.New()
	for _, name := range generatorFiles {
		data, err := os.ReadFile(name)
		if err != nil {
			return "", err
		}
		h.Write(data)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func writeJSON(out *strings.Builder, v any) {
	data, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	out.Write(data)
}

// moduleDir downloads (or finds in the module cache) a pinned module.
func moduleDir(module string) (string, error) {
	cmd := exec.Command("go", "mod", "download", "-json", module)
	cmd.Stderr = os.Stderr
	data, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go mod download %s: %w", module, err)
	}
	var info struct{ Dir string }
	if err := json.Unmarshal(data, &info); err != nil || info.Dir == "" {
		return "", fmt.Errorf("go mod download %s: no Dir in %s", module, data)
	}
	return info.Dir, nil
}

// openAPIName is the OpenAPI definition name of a Go type:
// k8s.io/api/core/v1.PodSpec -> io.k8s.api.core.v1.PodSpec.
func openAPIName(t reflect.Type) string {
	path := t.PkgPath()
	host, rest, _ := strings.Cut(path, "/")
	parts := strings.Split(host, ".")
	for i, j := 0, len(parts)-1; i < j; i, j = i+1, j-1 {
		parts[i], parts[j] = parts[j], parts[i]
	}
	return strings.Join(parts, ".") + "." + strings.ReplaceAll(rest, "/", ".") + "." + t.Name()
}

// resolve follows $ref and single-element allOf to the definition, keeping
// the extensions written beside the reference.
func (g *generator) resolve(s map[string]any) map[string]any {
	if s == nil {
		return nil
	}
	ref, _ := s["$ref"].(string)
	if all, ok := s["allOf"].([]any); ok && len(all) == 1 {
		if m, ok := all[0].(map[string]any); ok {
			ref, _ = m["$ref"].(string)
		}
	}
	if ref == "" {
		return s
	}
	return g.defs[strings.TrimPrefix(ref, "#/components/schemas/")]
}

func sub(s map[string]any, key string) map[string]any {
	if s == nil {
		return nil
	}
	m, _ := s[key].(map[string]any)
	return m
}

func str(s map[string]any, key string) string {
	if s == nil {
		return ""
	}
	v, _ := s[key].(string)
	return v
}

func boolean(s map[string]any, key string) bool {
	if s == nil {
		return false
	}
	v, _ := s[key].(bool)
	return v
}

func (g *generator) structIndex(t reflect.Type) (int, error) {
	if idx, ok := g.index[t]; ok {
		return idx, nil
	}
	name := openAPIName(t)
	def := g.defs[name]
	st := &structType{N: name, Go: t.Name()}
	if def != nil {
		st.A = str(def, "x-kubernetes-map-type") == "atomic"
		st.PU = boolean(def, "x-kubernetes-preserve-unknown-fields")
	}
	idx := len(g.types)
	g.types = append(g.types, st)
	g.index[t] = idx
	props := sub(def, "properties")
	if err := g.addFields(st, t, props, nil); err != nil {
		return 0, err
	}
	return idx, nil
}

// addFields adds t's JSON fields in declaration order, flattening inline
// embedded structs as encoding/json does.
func (g *generator) addFields(st *structType, t reflect.Type, props map[string]any, via []string) error {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		ft := f.Type
		if f.Anonymous && name == "" {
			et := ft
			if et.Kind() == reflect.Pointer {
				et = et.Elem()
			}
			if et.Kind() == reflect.Struct {
				inner := append(append([]string(nil), via...), f.Name)
				if err := g.addFields(st, et, props, inner); err != nil {
					return err
				}
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out := &field{N: name, IN: via}
		for _, opt := range strings.Split(opts, ",") {
			switch opt {
			case "omitempty":
				out.OE = true
			case "omitzero":
				out.OZ = true
			}
		}
		if ft.Kind() == reflect.Pointer {
			out.P = true
			ft = ft.Elem()
		}
		prop := sub(props, name)
		if prop != nil {
			out.E, _ = prop["enum"].([]any)
			switch d := prop["default"].(type) {
			case string, float64, bool:
				out.D = d
			}
			out.PU = boolean(prop, "x-kubernetes-preserve-unknown-fields") || boolean(g.resolve(prop), "x-kubernetes-preserve-unknown-fields")
			out.EMB = boolean(prop, "x-kubernetes-embedded-resource") || boolean(g.resolve(prop), "x-kubernetes-embedded-resource")
		}
		n, err := g.node(ft, prop)
		if err != nil {
			return fmt.Errorf("%s.%s: %w", t.Name(), name, err)
		}
		out.T = n
		st.F = append(st.F, out)
	}
	return nil
}

func (g *generator) node(t reflect.Type, prop map[string]any) (*node, error) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	n := &node{Go: t.String()}
	if reflect.PointerTo(t).Implements(jsonUnmarshaler) || t.Implements(jsonUnmarshaler) {
		switch openAPIName(t) {
		case "io.k8s.apimachinery.pkg.util.intstr.IntOrString":
			n.K = "int-or-string"
		case "io.k8s.apimachinery.pkg.api.resource.Quantity":
			n.K = "quantity"
		case "io.k8s.apimachinery.pkg.apis.meta.v1.Time", "io.k8s.apimachinery.pkg.apis.meta.v1.MicroTime":
			n.K = "time"
		default:
			n.K = "raw"
		}
		return n, nil
	}
	switch t.Kind() {
	case reflect.String:
		n.K = "string"
	case reflect.Bool:
		n.K = "boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		n.K = "integer"
		n.GK = t.Kind().String()
	case reflect.Float32, reflect.Float64:
		n.K = "number"
	case reflect.Interface:
		n.K = "raw"
	case reflect.Struct:
		idx, err := g.structIndex(t)
		if err != nil {
			return nil, err
		}
		n.K = "object"
		n.R = &idx
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			n.K = "bytes"
			break
		}
		n.K = "list"
		n.LT = str(prop, "x-kubernetes-list-type")
		if keys, ok := prop["x-kubernetes-list-map-keys"].([]any); ok {
			for _, k := range keys {
				n.LK = append(n.LK, k.(string))
			}
		}
		item, err := g.node(t.Elem(), sub(prop, "items"))
		if err != nil {
			return nil, err
		}
		n.I = item
	case reflect.Map:
		if t.Key().Kind() != reflect.String {
			return nil, fmt.Errorf("map key %s", t.Key())
		}
		n.K = "map"
		n.MT = str(prop, "x-kubernetes-map-type")
		value, err := g.node(t.Elem(), sub(prop, "additionalProperties"))
		if err != nil {
			return nil, err
		}
		n.V = value
	default:
		return nil, fmt.Errorf("unsupported Go kind %s", t.Kind())
	}
	return n, nil
}
