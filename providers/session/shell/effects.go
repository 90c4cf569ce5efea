package shell

import (
	"net/url"
	"path/filepath"
	"slices"
	"strings"

	"mvdan.cc/sh/v3/interp"
	"mvdan.cc/sh/v3/syntax"
)

// The evaluator cannot see what a process does inside, so for well-known
// programs it reads the effect off the command line: what rm deletes, what
// curl reaches, and which command a wrapper (sudo, env, timeout, xargs,
// find -exec) or a nested shell (sh -c) really runs. A denylist that only
// looks at the first word is what these rules are for.

// maxNesting bounds wrappers inside wrappers inside sh -c strings.
const maxNesting = 6

// valueFlags are, per program, the short options that take a value, so
// that the value is not mistaken for an operand.
var valueFlags = map[string]string{
	"mkdir": "m", "touch": "dtr", "truncate": "sr", "cp": "tS", "mv": "tS", "ln": "tS",
	"install": "tSmogS", "tee": "", "rm": "", "chmod": "", "chown": "", "chgrp": "",
	"ssh": "bcDEeFIiJLlmOoPpQRSWw", "scp": "cFiJlOoPS", "sftp": "BbcDFiJlOoPRS",
	"nc": "ipsqwWxX", "ncat": "ipsqwWxX", "netcat": "ipsqwWxX", "telnet": "bln", "ping": "cilwWsStQ",
}

// netSubcommands are programs that reach the network only for some
// subcommands.
var netSubcommands = map[string][]string{
	"git":     {"clone", "fetch", "pull", "push", "ls-remote", "submodule", "remote"},
	"npm":     {"install", "i", "ci", "add", "update", "publish", "view", "login"},
	"pnpm":    {"install", "i", "add", "update", "publish"},
	"yarn":    {"install", "add", "upgrade", "publish"},
	"bun":     {"install", "i", "add", "update", "publish"},
	"pip":     {"install", "download"},
	"pip3":    {"install", "download"},
	"uv":      {"pip", "add", "sync", "lock"},
	"go":      {"get", "install", "mod"},
	"cargo":   {"install", "fetch", "publish", "update", "search"},
	"apt":     {"install", "update", "upgrade", "download"},
	"apt-get": {"install", "update", "upgrade", "dist-upgrade", "download"},
	"docker":  {"pull", "push", "login", "search"},
	"podman":  {"pull", "push", "login", "search"},
	"brew":    {"install", "update", "upgrade", "fetch"},
}

// observeCommand records the effects, heads and marks one command line
// implies. depth counts wrappers and nested shells; the outermost head is
// recorded by the call handler.
func observeCommand(ru *run, dir string, args []string, offset uint, depth int) {
	if len(args) == 0 || depth > maxNesting {
		return
	}
	name := filepath.Base(args[0])
	if depth > 0 {
		ru.head(name, offset)
		if !interp.IsBuiltin(name) {
			ru.effect(EffectProcSpawn, name)
		}
	}
	rest := args[1:]
	for _, a := range rest {
		if isDotEnv(a) {
			ru.mark(MarkSecretSource)
		}
	}
	ops := operands(rest, valueFlags[name])
	abs := func(p string) string { return absIn(dir, p) }

	switch name {
	case "rm", "unlink", "rmdir", "shred":
		for _, o := range ops {
			ru.effect(EffectFSDelete, abs(o))
		}
	case "touch", "mkdir", "tee", "truncate":
		for _, o := range ops {
			ru.effect(EffectFSWrite, abs(o))
		}
	case "cp", "mv", "ln", "install":
		dest, srcs := "", ops
		if t := flagValue(rest, "-t", "--target-directory"); t != "" {
			dest = t
		} else if len(ops) >= 2 {
			dest, srcs = ops[len(ops)-1], ops[:len(ops)-1]
		}
		for _, s := range srcs {
			switch name {
			case "mv":
				ru.effect(EffectFSDelete, abs(s))
			case "cp", "install":
				ru.effect(EffectFSRead, abs(s))
			}
		}
		if dest != "" {
			ru.effect(EffectFSWrite, abs(dest))
		}
	case "chmod", "chown", "chgrp":
		if len(ops) > 1 {
			for _, o := range ops[1:] {
				ru.effect(EffectFSWrite, abs(o))
			}
		}
	case "dd":
		for _, a := range rest {
			if v, ok := strings.CutPrefix(a, "of="); ok {
				ru.effect(EffectFSWrite, abs(v))
			} else if v, ok := strings.CutPrefix(a, "if="); ok {
				ru.effect(EffectFSRead, abs(v))
			}
		}
	case "curl", "wget":
		hosts := 0
		for _, a := range rest {
			if h := urlHost(a); h != "" {
				ru.effect(EffectNet, h)
				hosts++
			}
		}
		if hosts == 0 {
			ru.effect(EffectNet, "")
		}
		out := flagValue(rest, "-o", "--output")
		if name == "wget" {
			out = flagValue(rest, "-O", "--output-document")
		}
		if out != "" && out != "-" {
			ru.effect(EffectFSWrite, abs(out))
		}
	case "ssh", "nc", "ncat", "netcat", "telnet", "ping", "ftp", "mosh":
		target := ""
		if len(ops) > 0 {
			target = remoteHost(ops[0], true)
		}
		ru.effect(EffectNet, target)
	case "scp", "sftp", "rsync", "sshfs":
		remote := false
		for _, o := range ops {
			if h := remoteHost(o, false); h != "" {
				ru.effect(EffectNet, h)
				remote = true
			}
		}
		if name == "sftp" && !remote {
			ru.effect(EffectNet, "")
		}
	case "printenv":
		ru.mark(MarkSecretSource)
	case "env":
		inner := unwrapEnv(rest)
		if len(inner) == 0 {
			ru.mark(MarkSecretSource)
			return
		}
		observeCommand(ru, dir, inner, offset, depth+1)
	case "sudo", "doas", "nohup", "setsid", "time", "nice", "timeout", "stdbuf", "xargs", "chroot", "ionice", "taskset", "watch", "flock", "caffeinate":
		observeCommand(ru, dir, unwrap(name, rest), offset, depth+1)
	case "find":
		observeFind(ru, dir, rest, offset, depth)
	case "sh", "bash", "dash", "zsh", "ksh", "ash", "busybox":
		if name == "busybox" {
			observeCommand(ru, dir, rest, offset, depth+1)
			return
		}
		if script, ok := shellScript(rest); ok {
			observeScript(ru, dir, script, offset, depth+1)
		}
	}

	if subs, ok := netSubcommands[name]; ok {
		sub, subArgs := subcommand(rest)
		if slices.Contains(subs, sub) {
			target := ""
			if name == "git" {
				target = gitRemote(sub, subArgs)
			}
			ru.effect(EffectNet, target)
		}
		if name == "git" {
			observeGit(ru, dir, sub, subArgs)
		}
	}
}

// operands returns the non-option arguments, skipping the values of the
// short options listed in takesValue and everything after "--" counting as
// operand.
func operands(args []string, takesValue string) []string {
	var ops []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return append(ops, args[i+1:]...)
		}
		if len(a) > 1 && a[0] == '-' {
			if a[1] != '-' {
				// getopt rules: the first letter that takes a value takes
				// the rest of the word, or the next word when none is left.
				for j := 1; j < len(a); j++ {
					if strings.IndexByte(takesValue, a[j]) >= 0 {
						if j == len(a)-1 {
							i++
						}
						break
					}
				}
			}
			continue
		}
		ops = append(ops, a)
	}
	return ops
}

// flagValue finds the value of a short or long option (-o FILE, -oFILE,
// --output FILE, --output=FILE).
func flagValue(args []string, short, long string) string {
	for i, a := range args {
		switch {
		case a == short || a == long:
			if i+1 < len(args) {
				return args[i+1]
			}
		case strings.HasPrefix(a, long+"="):
			return a[len(long)+1:]
		case len(short) == 2 && strings.HasPrefix(a, short) && len(a) > 2 && !strings.HasPrefix(a, "--"):
			return a[2:]
		}
	}
	return ""
}

// urlHost returns the host of a URL-looking argument.
func urlHost(a string) string {
	if !strings.Contains(a, "://") {
		return ""
	}
	u, err := url.Parse(a)
	if err != nil || u.Host == "" {
		return ""
	}
	return u.Hostname()
}

// remoteHost extracts the host of user@host, host:path or a URL; bare is
// true where a plain word is a host (ssh HOST).
func remoteHost(a string, bare bool) string {
	if h := urlHost(a); h != "" {
		return h
	}
	if strings.HasPrefix(a, "/") || strings.HasPrefix(a, ".") {
		return ""
	}
	host, _, hasColon := strings.Cut(a, ":")
	if !hasColon && !bare {
		return ""
	}
	if _, h, ok := strings.Cut(host, "@"); ok {
		host = h
	}
	return host
}

// unwrapEnv returns the command env runs, or nothing when env only prints
// the environment.
func unwrapEnv(args []string) []string {
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "-u" || a == "--unset" || a == "-C" || a == "--chdir":
			i++
		case a == "-S" || a == "--split-string":
			if i+1 < len(args) {
				return append(strings.Fields(args[i+1]), args[i+2:]...)
			}
			return nil
		case a == "--":
			return args[i+1:]
		case strings.HasPrefix(a, "-"):
		case strings.Contains(a, "="):
		default:
			return args[i:]
		}
	}
	return nil
}

// wrapperValueFlags are, per wrapper, the options that take a value.
var wrapperValueFlags = map[string][]string{
	"sudo":    {"-u", "-g", "-C", "-D", "-h", "-p", "-r", "-t", "-U", "--user", "--group"},
	"doas":    {"-u", "-C"},
	"nice":    {"-n", "--adjustment"},
	"timeout": {"-s", "-k", "--signal", "--kill-after"},
	"stdbuf":  {"-i", "-o", "-e"},
	"xargs":   {"-I", "-i", "-n", "-P", "-d", "-E", "-L", "-s", "-a", "--max-args", "--max-procs", "--delimiter", "--arg-file"},
	"ionice":  {"-c", "-n", "-p"},
	"taskset": {},
	"watch":   {"-n", "-d", "--interval"},
	"flock":   {"-w", "-E", "--timeout"},
}

// unwrap returns the command a wrapper runs.
func unwrap(name string, args []string) []string {
	vf := wrapperValueFlags[name]
	skipPositional := 0
	switch name {
	case "timeout":
		skipPositional = 1 // the duration
	case "chroot", "flock", "taskset":
		skipPositional = 1 // the new root, the lock file, the mask
	}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			// Everything after -- is positional: skip what the wrapper
			// itself takes, the rest is the command.
			rest := args[i+1:]
			if skipPositional < len(rest) {
				return rest[skipPositional:]
			}
			return nil
		}
		if strings.HasPrefix(a, "-") && len(a) > 1 {
			if slices.Contains(vf, a) {
				i++
			}
			continue
		}
		if name == "sudo" && strings.Contains(a, "=") {
			continue
		}
		if skipPositional > 0 {
			skipPositional--
			continue
		}
		return args[i:]
	}
	if name == "xargs" {
		return []string{"echo"}
	}
	return nil
}

// observeFind records find -delete and the commands of -exec/-execdir/-ok,
// with {} standing for the search roots.
func observeFind(ru *run, dir string, args []string, offset uint, depth int) {
	var roots []string
	i := 0
	for ; i < len(args) && !strings.HasPrefix(args[i], "-") && args[i] != "(" && args[i] != "!"; i++ {
		roots = append(roots, args[i])
	}
	if len(roots) == 0 {
		roots = []string{"."}
	}
	for ; i < len(args); i++ {
		switch args[i] {
		case "-delete":
			for _, r := range roots {
				ru.effect(EffectFSDelete, absIn(dir, r))
			}
		case "-exec", "-execdir", "-ok", "-okdir":
			var inner []string
			for i++; i < len(args) && args[i] != ";" && args[i] != "+"; i++ {
				if args[i] == "{}" {
					inner = append(inner, roots...)
				} else {
					inner = append(inner, args[i])
				}
			}
			observeCommand(ru, dir, inner, offset, depth+1)
		}
	}
}

// shellScript finds the -c script of a shell command line.
func shellScript(args []string) (string, bool) {
	for i, a := range args {
		if a == "--" || !strings.HasPrefix(a, "-") {
			return "", false
		}
		if !strings.HasPrefix(a, "--") && strings.Contains(a, "c") {
			if i+1 < len(args) {
				return args[i+1], true
			}
			return "", false
		}
	}
	return "", false
}

// observeScript derives effects from a nested shell script without running
// it: each simple command with a literal name, and each redirection to a
// literal file.
func observeScript(ru *run, dir, script string, offset uint, depth int) {
	f, err := syntax.NewParser().Parse(strings.NewReader(script), "")
	if err != nil {
		return
	}
	syntax.Walk(f, func(n syntax.Node) bool {
		switch n := n.(type) {
		case *syntax.CallExpr:
			var args []string
			for _, w := range n.Args {
				lit, ok := literal(w)
				if !ok {
					if len(args) == 0 {
						return true
					}
					lit = ""
				}
				args = append(args, lit)
			}
			observeCommand(ru, dir, args, offset, depth)
		case *syntax.Redirect:
			target, ok := literal(n.Word)
			if !ok || target == "" || n.Op == syntax.DplOut || n.Op == syntax.DplIn || quietPath(absIn(dir, target)) {
				return true
			}
			switch n.Op {
			case syntax.RdrOut, syntax.AppOut, syntax.RdrAll, syntax.AppAll, syntax.RdrClob, syntax.RdrInOut:
				ru.effect(EffectFSWrite, absIn(dir, target))
			case syntax.RdrIn:
				ru.effect(EffectFSRead, absIn(dir, target))
			}
		}
		return true
	})
}

// literal returns a word's value when it has no expansions (quotes are
// removed).
func literal(w *syntax.Word) (string, bool) {
	if w == nil {
		return "", false
	}
	var sb strings.Builder
	for _, p := range w.Parts {
		switch p := p.(type) {
		case *syntax.Lit:
			sb.WriteString(p.Value)
		case *syntax.SglQuoted:
			sb.WriteString(p.Value)
		case *syntax.DblQuoted:
			for _, q := range p.Parts {
				lit, ok := q.(*syntax.Lit)
				if !ok {
					return "", false
				}
				sb.WriteString(lit.Value)
			}
		default:
			return "", false
		}
	}
	return sb.String(), true
}

// subcommand returns the first operand of a program with subcommands and
// the arguments after it, skipping global options (git -C DIR -c k=v).
func subcommand(args []string) (string, []string) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "-C" || a == "-c" || a == "--git-dir" || a == "--work-tree" || a == "--namespace" {
			i++
			continue
		}
		if strings.HasPrefix(a, "-") {
			continue
		}
		return a, args[i+1:]
	}
	return "", nil
}

// gitRemote names what a git network subcommand talks to: the URL's host
// for clone, the remote name otherwise.
func gitRemote(sub string, args []string) string {
	ops := operands(args, "")
	if len(ops) == 0 {
		return ""
	}
	if h := remoteHost(ops[0], false); h != "" {
		return h
	}
	if sub == "clone" {
		return ""
	}
	return ops[0]
}

// observeGit records the working-tree effects of git subcommands that
// change or remove files.
func observeGit(ru *run, dir, sub string, args []string) {
	ops := operands(args, "")
	switch sub {
	case "rm":
		for _, o := range ops {
			ru.effect(EffectFSDelete, absIn(dir, o))
		}
	case "clean":
		ru.effect(EffectFSDelete, dir)
	case "clone":
		if len(ops) >= 2 {
			ru.effect(EffectFSWrite, absIn(dir, ops[1]))
		} else if len(ops) == 1 {
			base := strings.TrimSuffix(filepath.Base(strings.TrimRight(ops[0], "/")), ".git")
			if i := strings.LastIndexByte(base, ':'); i >= 0 {
				base = base[i+1:]
			}
			ru.effect(EffectFSWrite, absIn(dir, base))
		}
	case "checkout", "switch", "reset", "restore", "merge", "rebase", "pull", "stash", "apply", "am", "cherry-pick", "revert", "mv":
		ru.effect(EffectFSWrite, dir)
	}
}
