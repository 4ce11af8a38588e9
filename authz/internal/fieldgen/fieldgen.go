// Package fieldgen writes the code that walks writ's policy input, from one
// declaration: the input's Go types and their tags. The json tags are the
// policy contract (the names and the omitempty members the policy sees); the
// writ tags say how a member is served (memoized, copied, a cached digest).
// From them it writes, per struct type, the conversion to an OPA value (whole,
// and pruned to the paths a policy reads), the decision-cache key encoding
// (whole, and at a read path), the JSON encoding with members masked out
// (the decision log's record of the input) and, where asked, a deep copy.
// GeneratePaths writes the member paths alone, for a package of its own.
//
// It reads the declaration from source (go/parser), so it runs whatever state
// the generated file is in: a member removed, the package no longer compiling
// against the old output. authz runs it through `go generate` (./cmd), and
// authz's TestFieldsGenerated regenerates in memory and fails when the
// checked-in file is stale, so a member added without regenerating fails the
// build's tests, not a policy in production.
//
// The generated code calls helpers the package it is written into provides:
//
//	item(name string, v ast.Value) [2]*ast.Term   an object member
//	keyTerm(name string) *ast.Term                a member name's term
//	stringArray([]string) ast.Value
//	objectValue(map[string]any) ast.Value         a free-form object, whole
//	objectPruned(map[string]any, shape) ast.Value its top-level members that sub names
//	pruned[T](*T, shape, whole, field) ast.Value  a struct's members that sub names
//	memo[T](*T, [32]byte, build) ast.Value        a value cached by a digest
//	digestOf[T](tag string, *T, enc) [32]byte     a digest of a key encoding
//	type shape map[string]shape
//	type keyEnc with s(string), flag(bool), n(int) (a length), i(int64),
//	  list([]string), absent(), object(map[string]any, [32]byte),
//	  objectAt(map[string]any, []string, [32]byte)
//	type mask with keep(name string) bool (the member is not masked) and
//	  sub(name string) mask (the masks below it)
//	type jsonEnc with open(), close(), key(name), str(string), boolean(bool),
//	  integer(int64), strs([]string), null(), openList(), closeList(),
//	  object(map[string]any, mask)
package fieldgen

import (
	"bytes"
	"errors"
	"fmt"
	"go/ast"
	"go/format"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
)

// Options say what to generate.
type Options struct {
	// Dir is the directory of the package the declaration is in (its test
	// files included) and the output is for.
	Dir string
	// Root names the input document's struct type: its members are the
	// document's sections.
	Root string
	// Command regenerates the output (said in its header).
	Command string
}

type kind int

const (
	kString  kind = iota // a string kind
	kBool                // a bool kind
	kInt                 // a signed integer kind
	kStrings             // []string
	kStruct              // a struct, by value
	kPointer             // a pointer to a struct
	kSlice               // a slice of structs
	kObject              // map[string]any: a free-form JSON object
)

type field struct {
	goName    string
	name      string // the JSON member name
	omitempty bool
	kind      kind
	basic     string      // a scalar's underlying type: string, bool, int, int64...
	named     bool        // a scalar of a named type (task.Level)
	elem      *structType // kStruct, kPointer, kSlice
	digest    string      // kObject: the sibling [32]byte caching the object's digest
}

type structType struct {
	id     string // identifier suffix: InputCaller, TaskPartCounts
	expr   string // type expression in the output: InputCaller, task.PartCounts
	fields []field
	memo   bool // its whole value is memoized by its content
	clone  bool // a deep copy is generated
	// section: the root or a member of the root; a read path descends into
	// a section's members (deeper structs are read whole).
	section bool
}

// pkgSrc is one package's source: its type declarations and which of them
// have their own JSON form.
type pkgSrc struct {
	name, path string
	types      map[string]*typeDecl
	marshals   map[string]bool // a type with a MarshalJSON or MarshalText method
}

type typeDecl struct {
	spec *ast.TypeSpec
	file *ast.File // whose imports its expressions use
	pkg  *pkgSrc
}

type gen struct {
	opt              Options
	modRoot, modPath string
	root             *pkgSrc
	pkgs             map[string]*pkgSrc // by import path
	types            []*structType
	byDecl           map[*typeDecl]*structType
	walking          map[*typeDecl]bool
	imports          map[string]string // path → name
	names            []string
}

// Generate returns the gofmt'd source for the type o.Root and the types it
// reaches, or an error naming the first member it cannot convert exactly as
// encoding/json would.
func Generate(o Options) ([]byte, error) {
	g, st, err := load(o)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	g.write(&b, st)
	return formatted(b.Bytes())
}

// GeneratePaths returns the gofmt'd source, for package pkg, of the member
// paths of the type o.Root: every member at every depth, dotted
// ("caller.agent_id"), and the free-form objects among them. A package
// that must know the input's members without linking the engine (the
// configuration, validating the decision log's masks) imports it.
func GeneratePaths(o Options, pkg string) ([]byte, error) {
	g, st, err := load(o)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	g.writePaths(&b, st, pkg)
	return formatted(b.Bytes())
}

func formatted(src []byte) ([]byte, error) {
	out, err := format.Source(src)
	if err != nil {
		return nil, fmt.Errorf("fieldgen: formatting the output: %w\n%s", err, src)
	}
	return out, nil
}

// load reads the declaration of o.Root and every type it reaches.
func load(o Options) (*gen, *structType, error) {
	g := &gen{opt: o, pkgs: map[string]*pkgSrc{}, byDecl: map[*typeDecl]*structType{}, walking: map[*typeDecl]bool{},
		imports: map[string]string{}}
	st, err := g.load()
	return g, st, err
}

func (g *gen) load() (*structType, error) {
	o := g.opt
	if err := g.module(); err != nil {
		return nil, err
	}
	root, err := parseDir(o.Dir, true)
	if err != nil {
		return nil, err
	}
	g.root = root
	td, ok := root.types[o.Root]
	if !ok {
		return nil, fmt.Errorf("fieldgen: no type %s in %s", o.Root, o.Dir)
	}
	st, err := g.structOf(td, o.Root)
	if err != nil {
		return nil, err
	}
	st.section = true
	for _, f := range st.fields {
		if f.elem != nil && f.kind != kSlice {
			f.elem.section = true
		}
	}
	for _, t := range g.types {
		for _, f := range t.fields {
			if t.clone && f.kind == kObject {
				return nil, fmt.Errorf("fieldgen: %s.%s: a free-form object cannot be deep-copied (writ:\"clone\")", t.expr, f.goName)
			}
		}
	}
	return st, nil
}

// module finds the module o.Dir is in: its root and path.
func (g *gen) module() error {
	dir, err := filepath.Abs(g.opt.Dir)
	if err != nil {
		return err
	}
	for d := dir; ; d = filepath.Dir(d) {
		raw, err := os.ReadFile(filepath.Join(d, "go.mod"))
		if err == nil {
			for line := range strings.SplitSeq(string(raw), "\n") {
				if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "module "); ok {
					g.modRoot, g.modPath = d, strings.Trim(strings.TrimSpace(rest), `"`)
					return nil
				}
			}
			return fmt.Errorf("fieldgen: %s has no module line", filepath.Join(d, "go.mod"))
		}
		if !errors.Is(err, os.ErrNotExist) {
			return err
		}
		if filepath.Dir(d) == d {
			return fmt.Errorf("fieldgen: %s is not in a module", dir)
		}
	}
}

// parseDir reads a package's type declarations (with its in-package test
// files when tests), skipping generated files.
func parseDir(dir string, tests bool) (*pkgSrc, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("fieldgen: %w", err)
	}
	fset := token.NewFileSet()
	p := &pkgSrc{types: map[string]*typeDecl{}, marshals: map[string]bool{}}
	for _, en := range entries {
		name := en.Name()
		if en.IsDir() || !strings.HasSuffix(name, ".go") || (!tests && strings.HasSuffix(name, "_test.go")) {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			return nil, fmt.Errorf("fieldgen: %w", err)
		}
		if ast.IsGenerated(f) || strings.HasSuffix(f.Name.Name, "_test") {
			continue
		}
		if p.name == "" {
			p.name = f.Name.Name
		} else if p.name != f.Name.Name {
			return nil, fmt.Errorf("fieldgen: %s: package %s, not %s", name, f.Name.Name, p.name)
		}
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.GenDecl:
				for _, s := range d.Specs {
					if ts, ok := s.(*ast.TypeSpec); ok {
						p.types[ts.Name.Name] = &typeDecl{spec: ts, file: f, pkg: p}
					}
				}
			case *ast.FuncDecl:
				if d.Recv != nil && len(d.Recv.List) == 1 && (d.Name.Name == "MarshalJSON" || d.Name.Name == "MarshalText") {
					t := d.Recv.List[0].Type
					if s, ok := t.(*ast.StarExpr); ok {
						t = s.X
					}
					if id, ok := t.(*ast.Ident); ok {
						p.marshals[id.Name] = true
					}
				}
			}
		}
	}
	if p.name == "" {
		return nil, fmt.Errorf("fieldgen: no Go files in %s", dir)
	}
	return p, nil
}

// pkg is the source of the package imported as path (one of the module's).
func (g *gen) pkg(path string) (*pkgSrc, error) {
	if p, ok := g.pkgs[path]; ok {
		return p, nil
	}
	rel, ok := strings.CutPrefix(path, g.modPath+"/")
	if !ok {
		return nil, fmt.Errorf("only the module's own types are supported, not %s's", path)
	}
	p, err := parseDir(filepath.Join(g.modRoot, filepath.FromSlash(rel)), false)
	if err != nil {
		return nil, err
	}
	p.path = path
	g.pkgs[path] = p
	return p, nil
}

// lookup resolves a type name as written in td's file: a local name, or pkg.Name.
func (g *gen) lookup(e ast.Expr, in *typeDecl) (*typeDecl, bool, error) {
	switch e := e.(type) {
	case *ast.Ident:
		td, ok := in.pkg.types[e.Name]
		return td, ok, nil
	case *ast.SelectorExpr:
		x, ok := e.X.(*ast.Ident)
		if !ok {
			return nil, false, nil
		}
		for _, imp := range in.file.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			name := path[strings.LastIndex(path, "/")+1:]
			if imp.Name != nil {
				name = imp.Name.Name
			}
			if name != x.Name {
				continue
			}
			p, err := g.pkg(path)
			if err != nil {
				return nil, false, err
			}
			td, ok := p.types[e.Sel.Name]
			return td, ok, nil
		}
	}
	return nil, false, nil
}

var basics = map[string]kind{"string": kString, "bool": kBool, "int": kInt, "int8": kInt, "int16": kInt, "int32": kInt, "int64": kInt}

// structOf describes td's struct type and, first, every struct type it reaches.
func (g *gen) structOf(td *typeDecl, where string) (*structType, error) {
	if st, ok := g.byDecl[td]; ok {
		return st, nil
	}
	name := td.spec.Name.Name
	if g.walking[td] {
		return nil, fmt.Errorf("fieldgen: %s: %s contains itself", where, name)
	}
	sx, ok := td.spec.Type.(*ast.StructType)
	if !ok || td.spec.TypeParams != nil || td.spec.Assign.IsValid() {
		return nil, fmt.Errorf("fieldgen: %s: %s is not a plain struct type", where, name)
	}
	if td.pkg.marshals[name] {
		return nil, fmt.Errorf("fieldgen: %s: %s has its own JSON form, which the conversion would not follow", where, name)
	}
	g.walking[td] = true
	defer delete(g.walking, td)
	st := &structType{id: name, expr: name}
	if td.pkg != g.root {
		g.imports[td.pkg.path] = td.pkg.name
		st.id = td.pkg.name + "_" + name
		st.expr = td.pkg.name + "." + name
	}
	st.id = exportedID(st.id)
	seen := map[string]bool{}
	for _, fl := range sx.Fields.List {
		if len(fl.Names) == 0 {
			return nil, fmt.Errorf("fieldgen: %s.%s: embedded fields are not supported; name the member", where, exprString(fl.Type))
		}
		var tag reflect.StructTag
		if fl.Tag != nil {
			raw, err := strconv.Unquote(fl.Tag.Value)
			if err != nil {
				return nil, fmt.Errorf("fieldgen: %s: tag %s: %w", where, fl.Tag.Value, err)
			}
			tag = reflect.StructTag(raw)
		}
		for _, n := range fl.Names {
			at := where + "." + n.Name
			if !n.IsExported() {
				continue
			}
			f, ok, err := g.member(st, td, sx, n.Name, fl.Type, tag, at)
			if err != nil {
				return nil, err
			}
			if !ok {
				continue
			}
			if seen[f.name] {
				return nil, fmt.Errorf("fieldgen: %s: json name %q is used twice", at, f.name)
			}
			seen[f.name] = true
			st.fields = append(st.fields, f)
			g.name(f.name)
		}
	}
	g.byDecl[td] = st
	g.types = append(g.types, st)
	return st, nil
}

func exportedID(s string) string {
	parts := strings.Split(s, "_")
	for i, p := range parts {
		if p != "" {
			parts[i] = strings.ToUpper(p[:1]) + p[1:]
		}
	}
	return strings.Join(parts, "")
}

func exprString(e ast.Expr) string {
	var b bytes.Buffer
	if err := format.Node(&b, token.NewFileSet(), e); err != nil {
		return fmt.Sprintf("%T", e)
	}
	return b.String()
}

// member describes one exported field; ok is false for json:"-".
func (g *gen) member(st *structType, td *typeDecl, sx *ast.StructType, goName string, typ ast.Expr, tag reflect.StructTag, at string) (field, bool, error) {
	jt, ok := tag.Lookup("json")
	if !ok {
		return field{}, false, fmt.Errorf("fieldgen: %s: no json tag (its JSON name is the policy contract: say it)", at)
	}
	if jt == "-" {
		return field{}, false, nil
	}
	name, opts, _ := strings.Cut(jt, ",")
	f := field{goName: goName, name: name}
	for o := range strings.SplitSeq(opts, ",") {
		switch o {
		case "":
		case "omitempty":
			f.omitempty = true
		default:
			return field{}, false, fmt.Errorf("fieldgen: %s: json option %q is not supported", at, o)
		}
	}
	if name == "" {
		return field{}, false, fmt.Errorf("fieldgen: %s: the json tag names no member", at)
	}
	if err := g.kindOf(&f, typ, td, at); err != nil {
		return field{}, false, err
	}
	if err := g.writTag(st, &f, sx, tag, td.pkg == g.root, at); err != nil {
		return field{}, false, err
	}
	return f, true, nil
}

func (g *gen) kindOf(f *field, e ast.Expr, in *typeDecl, at string) error {
	unsupported := func() error {
		return fmt.Errorf("fieldgen: %s: %s is not supported (strings, bools, signed integers, []string, "+
			"structs, pointers to and slices of structs, map[string]any are)", at, exprString(e))
	}
	if id, ok := e.(*ast.Ident); ok {
		if k, ok := basics[id.Name]; ok && in.pkg.types[id.Name] == nil {
			f.kind, f.basic = k, id.Name
			return nil
		}
	}
	switch x := e.(type) {
	case *ast.Ident, *ast.SelectorExpr:
		td, ok, err := g.lookup(x, in)
		if err != nil {
			return fmt.Errorf("fieldgen: %s: %w", at, err)
		}
		if !ok {
			return unsupported()
		}
		return g.named(f, td, at, unsupported)
	case *ast.StarExpr:
		td, ok, err := g.lookup(x.X, in)
		if err != nil {
			return fmt.Errorf("fieldgen: %s: %w", at, err)
		}
		if !ok {
			return unsupported()
		}
		f.kind = kPointer
		f.elem, err = g.structOf(td, at)
		return err
	case *ast.ArrayType:
		if x.Len != nil {
			return unsupported()
		}
		if id, ok := x.Elt.(*ast.Ident); ok && id.Name == "string" && in.pkg.types["string"] == nil {
			f.kind = kStrings
			return nil
		}
		td, ok, err := g.lookup(x.Elt, in)
		if err != nil {
			return fmt.Errorf("fieldgen: %s: %w", at, err)
		}
		if !ok {
			return unsupported()
		}
		f.kind = kSlice
		f.elem, err = g.structOf(td, at)
		return err
	case *ast.MapType:
		k, kok := x.Key.(*ast.Ident)
		v, vok := x.Value.(*ast.Ident)
		iface, iok := x.Value.(*ast.InterfaceType)
		if kok && k.Name == "string" && ((vok && v.Name == "any") || (iok && len(iface.Methods.List) == 0)) {
			f.kind = kObject
			return nil
		}
	}
	return unsupported()
}

// named describes a member of a declared type: a struct, or a scalar of a
// named type (the output converts it).
func (g *gen) named(f *field, td *typeDecl, at string, unsupported func() error) error {
	if _, isStruct := td.spec.Type.(*ast.StructType); isStruct {
		f.kind = kStruct
		var err error
		f.elem, err = g.structOf(td, at)
		return err
	}
	id, ok := td.spec.Type.(*ast.Ident)
	if !ok || td.spec.TypeParams != nil || td.pkg.marshals[td.spec.Name.Name] {
		return unsupported()
	}
	k, basic := basics[id.Name]
	if !basic {
		return unsupported()
	}
	f.kind, f.basic, f.named = k, id.Name, !td.spec.Assign.IsValid()
	return nil
}

// writTag reads `writ:"memo,clone"` (on a struct member: its type's whole
// value is memoized by its content; a deep copy of it is generated) and
// `writ:"digest=name"` (on a map[string]any member: the unexported [32]byte
// member name holds the object's digest when it is not zero).
func (g *gen) writTag(st *structType, f *field, sx *ast.StructType, tag reflect.StructTag, local bool, at string) error {
	wt, ok := tag.Lookup("writ")
	if !ok {
		return nil
	}
	for o := range strings.SplitSeq(wt, ",") {
		switch key, val, _ := strings.Cut(o, "="); {
		case (key == "memo" || key == "clone") && val == "" && f.elem != nil && f.kind != kSlice:
			if key == "memo" {
				f.elem.memo = true
			} else {
				markClone(f.elem)
			}
		case key == "digest" && f.kind == kObject:
			if !local || !digestMember(sx, val) {
				return fmt.Errorf("fieldgen: %s: writ digest %q is not an unexported [32]byte member of %s", at, val, st.expr)
			}
			f.digest = val
		default:
			return fmt.Errorf("fieldgen: %s: writ option %q does not apply to this member", at, o)
		}
	}
	return nil
}

// digestMember reports whether sx has an unexported member name of type [32]byte.
func digestMember(sx *ast.StructType, name string) bool {
	for _, fl := range sx.Fields.List {
		for _, n := range fl.Names {
			if n.Name != name || n.IsExported() {
				continue
			}
			a, ok := fl.Type.(*ast.ArrayType)
			if !ok {
				return false
			}
			l, lok := a.Len.(*ast.BasicLit)
			el, eok := a.Elt.(*ast.Ident)
			return lok && l.Value == "32" && eok && (el.Name == "byte" || el.Name == "uint8")
		}
	}
	return false
}

func markClone(st *structType) {
	st.clone = true
	for _, f := range st.fields {
		if f.elem != nil {
			markClone(f.elem)
		}
	}
}

func (g *gen) name(n string) {
	if !slices.Contains(g.names, n) {
		g.names = append(g.names, n)
	}
}
