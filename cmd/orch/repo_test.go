package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// repoTop is the module root, two levels up from cmd/orch.
const repoTop = "../.."

// goPackages maps each package directory to its non-test Go files.
func goPackages(t *testing.T) map[string][]string {
	t.Helper()
	pkgs := map[string][]string{}
	err := filepath.WalkDir(repoTop, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") && path != repoTop || d.Name() == "testdata" || d.Name() == "bin") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go") {
			pkgs[filepath.Dir(path)] = append(pkgs[filepath.Dir(path)], path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return pkgs
}

// Every package says what it is for, once.
func TestEveryPackageHasOneDocComment(t *testing.T) {
	for dir, files := range goPackages(t) {
		n := 0
		for _, f := range files {
			af, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ParseComments|parser.PackageClauseOnly)
			if err != nil {
				t.Fatal(err)
			}
			if af.Doc != nil {
				n++
			}
		}
		if n != 1 {
			t.Errorf("%s: %d package doc comments, want exactly 1", dir, n)
		}
	}
}

// Product code does not poll: a sleep or ticker needs a comment on the same
// or the previous line saying why it is not polling.
func TestNoUnexplainedSleepOrTicker(t *testing.T) {
	for _, files := range goPackages(t) {
		for _, f := range files {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(string(data), "\n")
			for i, l := range lines {
				if !strings.Contains(l, "time.Sleep(") && !strings.Contains(l, "time.NewTicker(") && !strings.Contains(l, "time.Tick(") {
					continue
				}
				if strings.Contains(f, "internal/eventually") {
					continue // the tests' one waiting helper
				}
				prev := ""
				if i > 0 {
					prev = lines[i-1]
				}
				if !strings.Contains(l, "//") && !strings.Contains(prev, "//") {
					t.Errorf("%s:%d: sleep or ticker without a comment saying why it is not polling", f, i+1)
				}
			}
		}
	}
}

// Sentinel errors live in one errors.go per package, each with a doc
// comment, so a reader finds every way a package can fail in one place.
func TestSentinelsInErrorsGo(t *testing.T) {
	for _, files := range goPackages(t) {
		for _, f := range files {
			fset := token.NewFileSet()
			af, err := parser.ParseFile(fset, f, nil, parser.ParseComments)
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range af.Decls {
				gd, ok := d.(*ast.GenDecl)
				if !ok || gd.Tok != token.VAR {
					continue
				}
				for _, spec := range gd.Specs {
					vs := spec.(*ast.ValueSpec)
					for i, name := range vs.Names {
						if !strings.HasPrefix(name.Name, "Err") || i >= len(vs.Values) {
							continue
						}
						call, ok := vs.Values[i].(*ast.CallExpr)
						if !ok {
							continue
						}
						if sel, ok := call.Fun.(*ast.SelectorExpr); !ok || sel.Sel.Name != "New" {
							continue
						}
						if filepath.Base(f) != "errors.go" {
							t.Errorf("%s: sentinel %s belongs in errors.go", fset.Position(name.Pos()), name.Name)
						}
						if gd.Doc == nil && vs.Doc == nil {
							t.Errorf("%s: sentinel %s has no doc comment", fset.Position(name.Pos()), name.Name)
						}
					}
				}
			}
		}
	}
}
