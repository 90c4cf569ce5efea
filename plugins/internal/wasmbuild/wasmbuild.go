// Package wasmbuild builds Go packages into WebAssembly modules for tests:
// reactor modules as the kernel loads them (GOOS=wasip1 GOARCH=wasm
// -buildmode=c-shared) or WASI commands. Each build runs once per test
// binary: a build takes seconds, a test that needs the module again gets
// the same file.
//
// Use one Builder per test binary, made in TestMain:
//
//	var modules *wasmbuild.Builder
//
//	func TestMain(m *testing.M) {
//		modules = wasmbuild.New()
//		code := m.Run()
//		modules.Close()
//		os.Exit(code)
//	}
package wasmbuild

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// Builder builds modules into a private temporary directory, removed by
// Close.
type Builder struct {
	mu     sync.Mutex
	dir    string
	root   string
	err    error
	builds map[string]*build
}

type build struct {
	once sync.Once
	path string
	out  string
	err  error
}

// Spec says what to build.
type Spec struct {
	// Pkg is the package, relative to the module root ("./examples/kv").
	Pkg string
	// Command builds a WASI command (with _start) instead of a reactor.
	Command bool
	// Files, when set, are source files laid over Pkg's directory with
	// go build -overlay: file name → contents. Pkg need not exist on disk,
	// which lets a test build a plugin no one wrote before the test ran.
	Files map[string]string
}

func (s Spec) key() string {
	b, _ := json.Marshal(s) // map keys marshal sorted: a stable key
	return string(b)
}

// New returns a Builder. It does no work until the first build.
func New() *Builder { return &Builder{builds: map[string]*build{}} }

// Close removes every module built.
func (b *Builder) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.dir == "" {
		return nil
	}
	return os.RemoveAll(b.dir)
}

func (b *Builder) setup() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.dir != "" || b.err != nil {
		return b.err
	}
	if _, err := exec.LookPath("go"); err != nil {
		b.err = fmt.Errorf("the go command is not on PATH: %w", err)
		return b.err
	}
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil || strings.TrimSpace(string(out)) == "" || strings.TrimSpace(string(out)) == os.DevNull {
		b.err = fmt.Errorf("cannot find the module root (go env GOMOD): %v", err)
		return b.err
	}
	b.root = filepath.Dir(strings.TrimSpace(string(out)))
	if b.dir, err = os.MkdirTemp("", "shoal-wasm-*"); err != nil {
		b.err = err
	}
	return b.err
}

// Module builds spec once and returns the .wasm path. The test is skipped
// when no go command is available, and fails when the build does.
func (b *Builder) Module(t testing.TB, spec Spec) string {
	t.Helper()
	if err := b.setup(); err != nil {
		t.Skipf("cannot build wasm modules: %v", err)
	}
	b.mu.Lock()
	bd, ok := b.builds[spec.key()]
	if !ok {
		bd = &build{}
		b.builds[spec.key()] = bd
	}
	n := len(b.builds)
	b.mu.Unlock()
	bd.once.Do(func() {
		name := strings.ReplaceAll(strings.Trim(filepath.ToSlash(spec.Pkg), "./"), "/", "_")
		bd.path = filepath.Join(b.dir, fmt.Sprintf("%s-%d.wasm", name, n))
		bd.out, bd.err = b.run(spec, bd.path)
	})
	if bd.err != nil {
		t.Fatalf("build %s: %v\n%s", spec.Pkg, bd.err, bd.out)
	}
	return bd.path
}

func (b *Builder) run(spec Spec, out string) (string, error) {
	args := []string{"build", "-trimpath", "-o", out}
	if !spec.Command {
		args = append(args, "-buildmode=c-shared")
	}
	if len(spec.Files) > 0 {
		overlay := map[string]map[string]string{"Replace": {}}
		srcDir, err := os.MkdirTemp(b.dir, "src-*")
		if err != nil {
			return "", err
		}
		pkgDir := filepath.Join(b.root, filepath.FromSlash(spec.Pkg))
		for name, src := range spec.Files {
			real := filepath.Join(srcDir, name)
			if err := os.WriteFile(real, []byte(src), 0o600); err != nil {
				return "", err
			}
			overlay["Replace"][filepath.Join(pkgDir, name)] = real
		}
		ov := filepath.Join(srcDir, "overlay.json")
		data, _ := json.Marshal(overlay)
		if err := os.WriteFile(ov, data, 0o600); err != nil {
			return "", err
		}
		args = append(args, "-overlay", ov)
	}
	args = append(args, spec.Pkg)
	cmd := exec.Command("go", args...)
	cmd.Dir = b.root
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0")
	outb, err := cmd.CombinedOutput()
	return string(outb), err
}

// Folder makes a plugin folder in a fresh t.TempDir: the module copied
// under the name the manifest gives, the manifest, and any extra files.
// It returns the folder.
func Folder(t testing.TB, wasm, module, manifest string, extra map[string]string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "plugin")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	bin, err := os.ReadFile(wasm)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{module: bin, "plugin.toml": []byte(manifest)}
	for name, content := range extra {
		files[name] = []byte(content)
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), content, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}
