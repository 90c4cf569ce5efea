package abi

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestGuestExports keeps the sdk's //go:wasmexport directives, which must
// spell names literally, equal to Exports.
func TestGuestExports(t *testing.T) {
	src, err := os.ReadFile("../abi_wasip1.go")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range regexp.MustCompile(`(?m)^//go:wasmexport (\S+)$`).FindAllSubmatch(src, -1) {
		got = append(got, string(m[1]))
	}
	want := slices.Clone(Exports)
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("sdk/abi_wasip1.go exports %v, abi.Exports lists %v", got, want)
	}
}

// TestStdLibOnly: the sdk and this package import the standard library
// only (and the sdk this package), so a guest module links nothing else
// (docs/plugins.md promises it).
func TestStdLibOnly(t *testing.T) {
	for _, dir := range []string{".", ".."} {
		pkgs, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, file := range pkgs {
			if strings.HasSuffix(file, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(token.NewFileSet(), file, nil, parser.ImportsOnly)
			if err != nil {
				t.Fatal(err)
			}
			for _, imp := range f.Imports {
				path, _ := strconv.Unquote(imp.Path.Value)
				first, _, _ := strings.Cut(path, "/")
				if strings.Contains(first, ".") && path != "github.com/shoal-sh/shoal/sdk/abi" {
					t.Errorf("%s imports %s: the sdk uses the standard library only", file, path)
				}
			}
		}
	}
}
