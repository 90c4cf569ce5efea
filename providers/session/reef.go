package session

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"

	"github.com/BurntSushi/toml"

	"github.com/shoal-sh/shoal/core/wire"
)

// Reef manifest and lock file names.
const (
	ReefManifest = "reef.toml"
	ReefLock     = "reef.lock"
)

// reefManifest is reef.toml: [tools] maps a tool name to a version
// requirement ("*" for any, ">=1.22", "1.26.x" …).
type reefManifest struct {
	Tools map[string]string `toml:"tools"`
}

// reefLock is reef.lock: [tools.NAME] pins what was resolved.
type reefLock struct {
	Tools map[string]struct {
		Version string `toml:"version"`
		Path    string `toml:"path"`
	} `toml:"tools"`
}

// ReefTool is one declared tool of shoal://session/reef.
type ReefTool = wire.ReefTool

// ReefView is shoal://session/reef.
type ReefView = wire.ReefView

// reefView finds the nearest reef.toml at or above cwd and reports each
// declared tool. It only inspects: nothing is installed or run.
func reefView(cwd string, pathEnv string) ReefView {
	v := ReefView{Cwd: cwd, Tools: []ReefTool{}}
	dir := cwd
	for {
		m := filepath.Join(dir, ReefManifest)
		if _, err := os.Stat(m); err == nil {
			v.Scope, v.Manifest = dir, m
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			v.Message = fmt.Sprintf("no %s at or above %s: no Reef scope is active", ReefManifest, cwd)
			return v
		}
		dir = parent
	}
	v.Active = true
	var man reefManifest
	md, err := toml.DecodeFile(v.Manifest, &man)
	if err != nil {
		v.Message = fmt.Sprintf("%s does not parse: %v", v.Manifest, err)
		return v
	}
	if und := md.Undecoded(); len(und) > 0 {
		v.Message = fmt.Sprintf("%s: keys ignored (only [tools] is read): %v", v.Manifest, und)
	}
	var lock reefLock
	lockPath := filepath.Join(v.Scope, ReefLock)
	if _, err := toml.DecodeFile(lockPath, &lock); err == nil {
		v.Lock = &lockPath
	} else if !errors.Is(err, os.ErrNotExist) {
		v.Lock = &lockPath
		v.Message = strings.TrimSpace(v.Message + fmt.Sprintf(" %s does not parse: %v", lockPath, err))
	}
	names := make([]string, 0, len(man.Tools))
	for n := range man.Tools {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		t := ReefTool{Name: n, Requirement: man.Tools[n]}
		if p, err := lookPath(n, pathEnv); err == nil {
			t.Resolved, t.Path = true, p
		} else {
			t.Problem = fmt.Sprintf("%s is not on the session's PATH", n)
		}
		if l, ok := lock.Tools[n]; ok {
			t.Locked = &struct {
				Version string `json:"version,omitempty"`
				Path    string `json:"path,omitempty"`
			}{l.Version, l.Path}
			if l.Path != "" && t.Resolved {
				match := l.Path == t.Path
				t.LockMatches = &match
				if !match {
					t.Problem = fmt.Sprintf("locked at %s but the session resolves %s", l.Path, t.Path)
				}
			}
		} else if v.Lock != nil {
			t.Problem = strings.TrimSpace(t.Problem + " not pinned in " + ReefLock)
		}
		v.Tools = append(v.Tools, t)
	}
	return v
}

// lookPath resolves a command against a PATH value (the session's, not
// the kernel's).
func lookPath(name, pathEnv string) (string, error) {
	if strings.Contains(name, "/") {
		return exec.LookPath(name)
	}
	for _, dir := range filepath.SplitList(pathEnv) {
		if dir == "" {
			dir = "."
		}
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", exec.ErrNotFound
}
