package rlm_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The layers of the module (DESIGN.md, "Layout (by role)") and the rules
// that keep them apart. They are checked on the real package graph, from
// `go list`, so that a new import that breaks one fails here instead of
// being found by a reader months later.
//
//   - The vocabulary (core and its leaves ending, isolation, defaults)
//     links no gRPC or protobuf: code that only speaks about runs (the
//     sandbox, the RLM engine, a plugin's types) must not pay for the wire.
//   - The vocabulary imports nothing of the module but itself.
//   - Packages under the top-level internal/ import, of the module, only
//     the vocabulary, the wire (core/runtimepb) and internal/ itself: they
//     are machinery below the applications and the plugin SDK, never
//     above them.
//   - Nothing imports cmd/: the CLI is the outermost layer.
//   - The plugin SDK (core/plugin/...) links no host machinery
//     (core/client, internal/host) and no application (core/server, ...),
//     so a third-party plugin gets none of it.
//   - No exported identifier of a public package names a type of an
//     internal package: whatever the docs tell a third party to set must
//     be settable from outside the module.
const module = "github.com/rlmkit/rlm"

var vocabulary = []string{"core", "core/ending", "core/isolation", "core/defaults"}

// listed is the part of `go list -json` the rules read.
type listed struct {
	ImportPath string
	Name       string
	Dir        string
	GoFiles    []string
	Imports    []string
	Deps       []string
}

func listPackages(t *testing.T) []listed {
	t.Helper()
	cmd := exec.Command("go", "list", "-json", "./...")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	var pkgs []listed
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p listed
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("go list output: %v", err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

// rel is path relative to the module ("" for a path outside it).
func rel(path string) (string, bool) {
	if path == module {
		return ".", true
	}
	r, ok := strings.CutPrefix(path, module+"/")
	return r, ok
}

func under(path, dir string) bool { return path == dir || strings.HasPrefix(path, dir+"/") }

// isInternal says whether a module-relative path is an internal package
// (one Go lets only the module's own packages import).
func isInternal(r string) bool {
	return slices.Contains(strings.Split(r, "/"), "internal")
}

// importRules checks every rule that reads the import graph and returns
// one line per violation.
func importRules(pkgs []listed) []string {
	var bad []string
	for _, p := range pkgs {
		from, _ := rel(p.ImportPath)
		if slices.Contains(vocabulary, from) {
			for _, d := range p.Deps {
				if strings.HasPrefix(d, "google.golang.org/grpc") || strings.HasPrefix(d, "google.golang.org/protobuf") {
					bad = append(bad, fmt.Sprintf("%s links %s: the vocabulary links no gRPC or protobuf (move the wire's part to core/runtimepb, the client's to core/client)", from, d))
					break
				}
			}
		}
		for _, imp := range p.Imports {
			to, ok := rel(imp)
			if !ok {
				continue
			}
			switch {
			case slices.Contains(vocabulary, from) && !slices.Contains(vocabulary, to):
				bad = append(bad, fmt.Sprintf("%s imports %s: the vocabulary imports only itself", from, to))
			case under(from, "internal") && !slices.Contains(vocabulary, to) && to != "core/runtimepb" && !under(to, "internal"):
				bad = append(bad, fmt.Sprintf("%s imports %s: internal/ imports only the vocabulary (%s), core/runtimepb and internal/", from, to, strings.Join(vocabulary, ", ")))
			case under(to, "cmd") && !under(from, "cmd"):
				bad = append(bad, fmt.Sprintf("%s imports %s: nothing outside cmd/ imports cmd/", from, to))
			case under(from, "core/plugin") && (under(to, "core/client") || under(to, "internal/host") || slices.ContainsFunc(applications, func(a string) bool { return under(to, a) })):
				bad = append(bad, fmt.Sprintf("%s imports %s: the plugin SDK links no host machinery or application", from, to))
			}
		}
	}
	return bad
}

// applications are the module's programs' bodies, above everything else.
var applications = []string{"core/server", "core/mcpserver", "core/daemon", "core/engine", "core/llm", "core/traceview", "core/config"}

// apiRule checks that no exported identifier of a public (non-internal,
// non-main) package names a type of an internal package, reading the
// declarations of the package's non-test files.
func apiRule(t *testing.T, pkgs []listed) []string {
	var bad []string
	for _, p := range pkgs {
		r, ok := rel(p.ImportPath)
		if !ok || isInternal(r) || p.Name == "main" {
			continue
		}
		for _, name := range p.GoFiles {
			file := filepath.Join(p.Dir, name)
			f, err := parser.ParseFile(token.NewFileSet(), file, nil, parser.SkipObjectResolution)
			if err != nil {
				t.Fatalf("parsing %s: %v", file, err)
			}
			for _, v := range exportedInternal(f) {
				bad = append(bad, fmt.Sprintf("%s: exported %s", filepath.Join(r, name), v))
			}
		}
	}
	return bad
}

// exportedInternal lists the exported declarations of f whose types name
// an internal package of the module (as "Ident names pkg.Type").
func exportedInternal(f *ast.File) []string {
	internal := map[string]string{} // local name -> import path
	for _, imp := range f.Imports {
		path, _ := strconv.Unquote(imp.Path.Value)
		r, ok := rel(path)
		if !ok || !isInternal(r) {
			continue
		}
		local := filepath.Base(path)
		if imp.Name != nil {
			local = imp.Name.Name
		}
		internal[local] = path
	}
	if len(internal) == 0 {
		return nil
	}
	var found []string
	names := func(what string, expr ast.Node) {
		if expr == nil {
			return
		}
		ast.Inspect(expr, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.FuncLit, *ast.BlockStmt:
				return false // bodies are not API
			case *ast.SelectorExpr:
				if x, ok := n.X.(*ast.Ident); ok && internal[x.Name] != "" && ast.IsExported(n.Sel.Name) {
					found = append(found, fmt.Sprintf("%s names %s.%s (%s)", what, x.Name, n.Sel.Name, internal[x.Name]))
				}
			}
			return true
		})
	}
	fields := func(owner string, fl *ast.FieldList) {
		if fl == nil {
			return
		}
		for _, fld := range fl.List {
			if len(fld.Names) == 0 { // embedded: exported when its type is
				names(owner+" (embedded)", fld.Type)
				continue
			}
			for _, n := range fld.Names {
				if n.IsExported() {
					names(owner+"."+n.Name, fld.Type)
				}
			}
		}
	}
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			if !d.Name.IsExported() {
				continue
			}
			name := d.Name.Name
			if d.Recv != nil {
				recv := d.Recv.List[0].Type
				if s, ok := recv.(*ast.StarExpr); ok {
					recv = s.X
				}
				if ix, ok := recv.(*ast.IndexExpr); ok {
					recv = ix.X
				}
				if id, ok := recv.(*ast.Ident); !ok || !id.IsExported() {
					continue
				}
				name = fmt.Sprint(recv) + "." + name
			}
			names(name, d.Type)
		case *ast.GenDecl:
			for _, s := range d.Specs {
				switch s := s.(type) {
				case *ast.TypeSpec:
					if !s.Name.IsExported() {
						continue
					}
					switch tt := s.Type.(type) {
					case *ast.StructType:
						fields(s.Name.Name, tt.Fields)
					case *ast.InterfaceType:
						fields(s.Name.Name, tt.Methods)
					default:
						names(s.Name.Name, s.Type)
					}
				case *ast.ValueSpec:
					for _, n := range s.Names {
						if n.IsExported() {
							names(n.Name, s.Type)
							for _, v := range s.Values {
								names(n.Name, valueType(v))
							}
						}
					}
				}
			}
		}
	}
	return found
}

// valueType is the part of a declared value that decides its type when
// the declaration names none: a composite literal's type (T{...},
// &T{...}) or a bare selector (a constant or variable of another
// package). Anything else (a call, say) would need type checking; the
// values inside a literal are not API.
func valueType(v ast.Expr) ast.Node {
	if u, ok := v.(*ast.UnaryExpr); ok && u.Op == token.AND {
		v = u.X
	}
	switch v := v.(type) {
	case *ast.CompositeLit:
		return v.Type
	case *ast.SelectorExpr:
		return v
	}
	return nil
}

// TestLayers checks the module's package graph against the rules above.
func TestLayers(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("the go command is not in PATH")
	}
	pkgs := listPackages(t)
	if len(pkgs) < 20 {
		t.Fatalf("go list found only %d packages; is this the module root?", len(pkgs))
	}
	for _, v := range append(importRules(pkgs), apiRule(t, pkgs)...) {
		t.Error(v)
	}
}

// The rules catch what they are for: each deliberate violation, added to
// a copy of the graph or the source, is reported.
func TestLayersCatchViolations(t *testing.T) {
	m := func(r string) string { return module + "/" + r }
	graph := []listed{
		{ImportPath: m("core"), Deps: []string{"google.golang.org/grpc"}},
		{ImportPath: m("core/ending"), Imports: []string{m("core/runtimepb")}},
		{ImportPath: m("internal/sandbox/isolate"), Imports: []string{m("core/plugin/program"), m("core/isolation"), "os"}},
		{ImportPath: m("internal/host/launch"), Imports: []string{m("core/runtimepb"), m("internal/sandbox/proctree")}},
		{ImportPath: m("core/server"), Imports: []string{m("cmd/rlm/cli/cmdutil")}},
		{ImportPath: m("cmd/rlm/cli/root"), Imports: []string{m("cmd/rlm/cli/cmdutil")}},
		{ImportPath: m("core/plugin/native"), Imports: []string{m("core/client")}},
	}
	got := strings.Join(importRules(graph), "\n")
	for _, want := range []string{
		"core links google.golang.org/grpc",
		"core/ending imports core/runtimepb",
		"internal/sandbox/isolate imports core/plugin/program",
		"core/server imports cmd/rlm/cli/cmdutil",
		"core/plugin/native imports core/client",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("importRules missed %q; it said:\n%s", want, got)
		}
	}
	for _, allowed := range []string{"internal/host/launch", "cmd/rlm/cli/root"} {
		if strings.Contains(got, allowed+" imports") {
			t.Errorf("importRules refused an allowed import of %s:\n%s", allowed, got)
		}
	}

	src := `package native
import (
	"github.com/rlmkit/rlm/internal/sandbox/isolate"
	w "github.com/rlmkit/rlm/plugins/internal/warm"
)
type Runtime struct {
	Installer func() *isolate.Cmd
	hidden    isolate.Spec
}
type Hook interface{ Warm(w.Config) }
func New(s isolate.Spec) {}
func (r *Runtime) Start() { _ = isolate.Spec{} }
var Default = isolate.Spec{}
var Level = isolate.LevelNone
var Plugin = &Runtime{Installer: func() *isolate.Cmd { return nil }}
`
	f, err := parser.ParseFile(token.NewFileSet(), "x.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	got = strings.Join(exportedInternal(f), "\n")
	for _, want := range []string{"Runtime.Installer names isolate.Cmd", "Hook.Warm names w.Config", "New names isolate.Spec", "Default names isolate.Spec", "Level names isolate.LevelNone"} {
		if !strings.Contains(got, want) {
			t.Errorf("exportedInternal missed %q; it said:\n%s", want, got)
		}
	}
	if strings.Contains(got, "hidden") || strings.Contains(got, "Start") || strings.Contains(got, "Plugin") {
		t.Errorf("exportedInternal reported an unexported field, a function body or a value inside a literal:\n%s", got)
	}
}
