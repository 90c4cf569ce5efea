package repocheck

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// maxFuncLines bounds a non-test function, from its func keyword to its
// closing brace (issue 16: a 275-line runClient was where bugs hid).
const maxFuncLines = 120

// root is the module root, two levels up from this package.
const root = "../.."

// sourceFiles returns the module's non-test Go files, skipping testdata
// and hidden directories (and nested modules, which have their own
// go.mod).
func sourceFiles(t *testing.T) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if p != root && (name == "testdata" || name == "node_modules" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
				return filepath.SkipDir
			}
			if p != root {
				if _, err := os.Stat(filepath.Join(p, "go.mod")); err == nil {
					return filepath.SkipDir
				}
			}
			return nil
		}
		if strings.HasSuffix(p, ".go") && !strings.HasSuffix(p, "_test.go") {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 50 {
		t.Fatalf("found only %d Go files under %s: is the walk broken?", len(files), root)
	}
	return files
}

type longFunc struct {
	where string
	name  string
	lines int
}

// longFuncs parses src (named file) and returns its functions and methods
// longer than limit lines, function literals included in their enclosing
// declaration.
func longFuncs(fset *token.FileSet, file string, src any, limit int) ([]longFunc, error) {
	f, err := parser.ParseFile(fset, file, src, parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	var out []longFunc
	for _, decl := range f.Decls {
		fd, ok := decl.(*ast.FuncDecl)
		if !ok || fd.Body == nil {
			continue
		}
		start, end := fset.Position(fd.Pos()), fset.Position(fd.End())
		if n := end.Line - start.Line + 1; n > limit {
			name := fd.Name.Name
			if fd.Recv != nil && len(fd.Recv.List) == 1 {
				name = recvName(fd.Recv.List[0].Type) + "." + name
			}
			out = append(out, longFunc{where: start.String(), name: name, lines: n})
		}
	}
	return out, nil
}

func recvName(e ast.Expr) string {
	switch x := e.(type) {
	case *ast.StarExpr:
		return recvName(x.X)
	case *ast.IndexExpr:
		return recvName(x.X)
	case *ast.IndexListExpr:
		return recvName(x.X)
	case *ast.Ident:
		return x.Name
	}
	return "?"
}

// TestFunctionLength fails for every non-test function over maxFuncLines
// lines. Split the function by what its parts do; a table of data can
// move into a variable or several smaller constructors.
func TestFunctionLength(t *testing.T) {
	fset := token.NewFileSet()
	var long []longFunc
	for _, file := range sourceFiles(t) {
		fs, err := longFuncs(fset, file, nil, maxFuncLines)
		if err != nil {
			t.Fatal(err)
		}
		long = append(long, fs...)
	}
	sort.Slice(long, func(i, j int) bool { return long[i].lines > long[j].lines })
	for _, f := range long {
		t.Errorf("%s: %s is %d lines, over %d", f.where, f.name, f.lines, maxFuncLines)
	}
}

// TestLongFuncsCounts checks the counter itself on a known source: a
// function exactly at the limit passes, one line more fails, and a
// method is named with its receiver.
func TestLongFuncsCounts(t *testing.T) {
	body := func(name string, lines int) string {
		// "func name() {" + (lines-2) statements + "}"
		return name + "() {\n" + strings.Repeat("\t_ = 0\n", lines-2) + "}\n"
	}
	src := "package p\n\ntype T struct{}\n\nfunc " + body("ok", 5) + "\nfunc " + body("long", 6) +
		"\nfunc (t *T) " + body("method", 7) + "\nfunc decl()\n"
	got, err := longFuncs(token.NewFileSet(), "p.go", src, 5)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range got {
		names = append(names, f.name)
	}
	if strings.Join(names, " ") != "long T.method" || got[0].lines != 6 || got[1].lines != 7 {
		t.Fatalf("long functions = %+v", got)
	}
}
