package analyze

import (
	"slices"
	"strings"

	"github.com/shoal-sh/shoal/core/policy"
)

func sudoCmd(w *walker, s *scope, c *cmd) {
	w.spawn(s, c, "", true, "runs the command below with other privileges")
	spec := optSpec{shortVal: "ughpCDrtTUc", longVal: []string{"user", "group", "host", "prompt", "close-from", "chdir", "role", "type", "command-timeout", "other-user", "login-class"}, stopAtOperand: true}
	if c.head == "doas" {
		spec = optSpec{shortVal: "uC", stopAtOperand: true}
	}
	p := w.parse(c.args, spec)
	t := s
	if d, ok := p.val("D", "chdir"); ok {
		t = s.clone()
		if abs, ok := w.abs(s, d); ok {
			t.cwd = abs
		} else {
			t.cwdKnown = false
		}
	}
	if len(p.rest) == 0 {
		if p.has("s", "shell", "i", "login") {
			w.dynamicSpawn(c.head, c.head+" shell", "opens a privileged shell whose commands are not known")
		}
		return
	}
	if p.has("s", "shell", "i", "login") {
		// The command line goes through a shell.
		if vals, ok := argVals(p.rest); ok {
			w.source(t, strings.Join(vals, " "), c.head, c.head, false, nil)
			return
		}
	}
	w.run(t, p.rest, false)
}

func envCmd(w *walker, s *scope, c *cmd) {
	p := w.parse(c.args, optSpec{shortVal: "uCS", longVal: []string{"unset", "chdir", "split-string"}, stopAtOperand: true})
	t := s
	if d, ok := p.val("C", "chdir"); ok {
		t = s.clone()
		if abs, ok := w.abs(s, d); ok {
			t.cwd = abs
		} else {
			t.cwdKnown = false
		}
	}
	if split, ok := p.val("S", "split-string"); ok {
		w.spawn(s, c, "", true, modeled)
		if split.dyn {
			w.dynamicSpawn("env", split.text, "the command is known only at run time")
			return
		}
		extra, _ := argVals(p.rest)
		// env -S splits by its own rules (escapes, ${VAR}), which are
		// close to the shell's but not the same.
		w.opaque(c, "env -S splits its string by its own rules, not the shell's: the command may differ from what is shown")
		w.source(t, split.val+" "+strings.Join(extra, " "), "env", "env -S", false, nil)
		return
	}
	rest := p.rest
	for len(rest) > 0 && !rest[0].dyn && strings.Contains(rest[0].val, "=") && !strings.HasPrefix(rest[0].val, "=") {
		rest = rest[1:]
	}
	if len(rest) == 0 {
		w.spawn(s, c, "", true, "prints the environment")
		return
	}
	w.spawn(s, c, "", true, modeled)
	w.run(t, rest, false)
}

func flockCmd(w *walker, s *scope, c *cmd) {
	w.spawn(s, c, "", true, modeled)
	p := w.parse(c.args, optSpec{shortVal: "wEc", longVal: []string{"timeout", "conflict-exit-code", "command"}, stopAtOperand: true})
	if len(p.rest) == 0 {
		return
	}
	w.fs(s, p.rest[0], fsReq{kind: policy.FSWrite, mode: modeCreate, head: c.head})
	if cmdText, ok := p.val("c", "command"); ok {
		if cmdText.dyn {
			w.dynamicSpawn(c.head, cmdText.text, "the command is known only at run time")
			return
		}
		w.source(s, cmdText.val, c.head, "flock -c", false, nil)
		return
	}
	w.run(s, p.rest[1:], false)
}

func watchCmd(w *walker, s *scope, c *cmd) {
	w.spawn(s, c, "", true, modeled)
	p := w.parse(c.args, optSpec{shortVal: "nqd", longVal: []string{"interval", "differences"}, stopAtOperand: true})
	vals, ok := argVals(p.rest)
	if !ok {
		w.dynamicSpawn(c.head, joinText(p.rest), "the command is known only at run time")
		return
	}
	if len(vals) > 0 {
		w.source(s, strings.Join(vals, " "), c.head, "watch", false, nil)
	}
}

// shellCmd: sh -c TEXT, sh SCRIPT, or sh reading its program from stdin.
func shellCmd(w *walker, s *scope, c *cmd) {
	w.spawn(s, c, "", true, modeled)
	startup := "BASH_ENV"
	if c.head != "bash" {
		startup = "ENV"
	}
	if v, ok := s.vars[startup]; ok && (!v.known || v.val != "") {
		w.opaque(c, c.head+" runs the file $"+startup+" names first, which Shoal does not read")
	} else if !ok && w.env.Lookup != nil {
		if v, set := w.env.Lookup(startup); set && v != "" {
			w.opaque(c, c.head+" runs the file $"+startup+" ("+v+") first, which Shoal does not read")
		}
	}
	for _, a := range c.args {
		if !a.dyn && (a.val == "--rcfile" || a.val == "--init-file" || a.val == "--login" || a.val == "-l" || a.val == "-i" ||
			strings.HasPrefix(a.val, "-") && !strings.HasPrefix(a.val, "--") && strings.ContainsAny(a.val, "il")) {
			w.opaque(c, c.head+" runs start-up files (~/.bashrc, ~/.profile, --rcfile) whose commands Shoal does not read")
			break
		}
		if !a.dyn && !strings.HasPrefix(a.val, "-") {
			break
		}
	}
	var (
		code     *arg
		operands []arg
		stdin    bool
	)
	for i := 0; i < len(c.args); i++ {
		a := c.args[i]
		switch {
		case a.dyn && code == nil && len(operands) == 0:
			w.dynamicSpawn(c.head, joinText(c.args[i:]), "shell arguments known only at run time")
			return
		case !a.dyn && (a.val == "-o" || a.val == "+o" || a.val == "-O" || a.val == "+O" || a.val == "--rcfile" || a.val == "--init-file"):
			i++
		case !a.dyn && a.val == "--":
			operands = append(operands, c.args[i+1:]...)
			i = len(c.args)
		case !a.dyn && len(operands) == 0 && (strings.HasPrefix(a.val, "-") || strings.HasPrefix(a.val, "+")) && len(a.val) > 1:
			if strings.HasPrefix(a.val, "--") {
				continue
			}
			if strings.Contains(a.val, "c") && a.val[0] == '-' {
				// The first operand after the options is the code.
				for j := i + 1; j < len(c.args); j++ {
					x := c.args[j]
					if !x.dyn && strings.HasPrefix(x.val, "-") && code == nil {
						continue
					}
					code = &c.args[j]
					operands = append(operands, c.args[j+1:]...)
					break
				}
				i = len(c.args)
				continue
			}
			if strings.Contains(a.val, "s") {
				stdin = true
			}
		default:
			operands = append(operands, c.args[i:]...)
			i = len(c.args)
		}
	}
	switch {
	case code != nil:
		if code.dyn {
			w.dynamicSpawn(c.head, code.text, "runs shell code known only at run time")
			return
		}
		// $0 is the first operand after the code; $1… the rest.
		var params []arg
		if len(operands) > 1 {
			params = operands[1:]
		}
		w.source(s, code.val, c.head, c.head+" -c", false, params)
	case len(operands) > 0 && !stdin:
		script := operands[0]
		p, ok := w.abs(s, script)
		if !ok {
			w.fs(s, script, fsReq{kind: policy.FSRead, head: c.head, executes: true})
			w.dynamicSpawn(c.head, script.text, "runs a script known only at run time")
			return
		}
		w.script(s, p, c.head, operands[1:])
	default:
		if w.env.Terminal {
			return // an interactive shell on the terminal
		}
		w.dynamicSpawn(c.head, c.head+" (stdin)", "runs commands read from stdin, which are not known before they arrive")
	}
}

func busyboxCmd(w *walker, s *scope, c *cmd) {
	if len(c.args) == 0 {
		w.spawn(s, c, "", true, "prints its applets")
		return
	}
	w.run(s, c.args, false)
}

// interpCmd: other language interpreters. Inline code (-c, -e) is as
// opaque as a string handed to eval; a script file is an ordinary tool run.
func interpCmd(w *walker, s *scope, c *cmd) {
	inline := map[string][]string{
		"python": {"-c"}, "python3": {"-c"}, "python2": {"-c"}, "perl": {"-e", "-E"},
		"ruby": {"-e"}, "node": {"-e", "--eval", "-p", "--print"}, "nodejs": {"-e", "--eval", "-p", "--print"},
		"php": {"-r"}, "lua": {"-e"}, "deno": {"eval"}, "bun": {"-e", "--eval"}, "osascript": {"-e"}, "Rscript": {"-e"},
	}[c.head]
	if inline == nil {
		// Other interpreters (csh, fish, expect, gdb…): code on the
		// command line through any option.
		inline = []string{"-c", "-e", "-x", "-ex", "-Command", "-f"}
	}
	for _, a := range c.args {
		if a.dyn {
			continue
		}
		for _, flag := range inline {
			// Short options cluster: perl -ne, python -Bc.
			if a.val == flag || (len(flag) == 2 && strings.HasPrefix(a.val, "-") && !strings.HasPrefix(a.val, "--") && strings.Contains(a.val[1:], flag[1:])) {
				w.spawn(s, c, "", false, modeled)
				w.dynamicSpawn(c.head, c.head+" "+joinText(c.args), "runs inline "+c.head+" code whose effects Shoal cannot see")
				return
			}
		}
	}
	if len(c.args) == 0 || slices.ContainsFunc(c.args, func(a arg) bool { return !a.dyn && a.val == "-" }) {
		w.spawn(s, c, "", false, modeled)
		if !w.env.Terminal {
			w.dynamicSpawn(c.head, c.head+" (stdin)", "runs code read from stdin")
		}
		return
	}
	w.spawn(s, c, "", false, "runs a "+c.head+" program whose effects Shoal does not model")
	for _, a := range c.args {
		if !a.dyn && !strings.HasPrefix(a.val, "-") {
			w.fs(s, a, fsReq{kind: policy.FSRead, head: c.head, executes: true})
			break
		}
	}
}

// fetchRunCmd: npx and friends download a package and run it.
func fetchRunCmd(w *walker, s *scope, c *cmd) {
	w.spawn(s, c, "exec", false, modeled)
	w.net(c, arg{val: registry(c.head), text: c.head}, "exec", false, false, "")
	w.dynamicSpawn(c.head, c.head+" "+joinText(c.args), "downloads a package and runs its code, which Shoal cannot see")
}

func registry(head string) string {
	switch head {
	case "npm", "npx", "pnpm", "pnpx", "yarn", "bun", "bunx":
		return "registry.npmjs.org"
	case "pip", "pip3", "pipx", "uv", "uvx":
		return "pypi.org"
	case "cargo":
		return "crates.io"
	case "go":
		return "proxy.golang.org"
	case "gem", "bundle":
		return "rubygems.org"
	case "composer":
		return "packagist.org"
	}
	return head + " repositories"
}

var installSubs = []string{"install", "i", "add", "ci", "get", "remove", "rm", "uninstall", "purge",
	"upgrade", "dist-upgrade", "update", "sync"}

// pkgCmd: package managers; the subcommand decides.
func pkgCmd(w *walker, s *scope, c *cmd) {
	p := w.parse(c.args, optSpec{shortVal: "Cf", longVal: []string{"prefix", "registry", "index-url", "manifest-path", "target"}, stopAtOperand: true})
	if len(p.rest) == 0 {
		w.spawn(s, c, "", true, modeled)
		return
	}
	if p.rest[0].dyn {
		w.spawn(s, c, "", false, modeled)
		w.dynamicSpawn(c.head, joinText(p.rest), "the subcommand is known only at run time")
		return
	}
	sub := p.rest[0].val
	switch {
	case (c.head == "npm" || c.head == "pnpm" || c.head == "yarn") && (sub == "exec" || sub == "dlx" || sub == "x"),
		c.head == "pipx" && sub == "run", c.head == "uv" && sub == "tool" && len(p.rest) > 1 && p.rest[1].val == "run":
		fetchRunCmd(w, s, &cmd{name: c.name, head: c.head, args: p.rest[1:]})
	case slices.Contains(installSubs, sub):
		w.spawn(s, c, sub, false, "installs or removes packages and runs their install scripts")
		w.net(c, arg{val: registry(c.head), text: c.head}, sub, false, false, "")
	default:
		w.spawn(s, c, sub, false, "runs "+c.head+" "+sub+"; build and test steps run project code Shoal does not model")
	}
}

var inspectSubs = []string{"ps", "images", "inspect", "logs", "version", "info", "stats", "top", "port",
	"diff", "history", "search", "events", "get", "describe", "explain", "api-resources", "api-versions",
	"cluster-info", "list", "ls", "status"}

// clusterCmd: docker, podman, kubectl, helm.
func clusterCmd(w *walker, s *scope, c *cmd) {
	p := w.parse(c.args, optSpec{shortVal: "Hcnls", longVal: []string{"host", "context", "config", "namespace",
		"cluster", "kubeconfig", "server", "user", "as", "log-level", "kube-context"}, stopAtOperand: true})
	if len(p.rest) == 0 {
		w.spawn(s, c, "", true, "prints usage")
		return
	}
	if p.rest[0].dyn {
		w.spawn(s, c, "", false, modeled)
		w.dynamicSpawn(c.head, joinText(p.rest), "the subcommand is known only at run time")
		return
	}
	sub := p.rest[0].val
	if slices.Contains(inspectSubs, sub) {
		w.spawn(s, c, sub, true, "inspects; changes nothing")
		return
	}
	w.spawn(s, c, sub, false, "changes container or cluster state, outside the work tree")
}

func makeCmd(w *walker, s *scope, c *cmd) {
	p := w.parse(c.args, optSpec{shortVal: "CfIjlWo", longVal: []string{"directory", "file", "makefile", "include-dir", "jobs", "load-average", "what-if", "old-file"}})
	sub := ""
	for _, a := range p.ops {
		if !a.dyn && !strings.Contains(a.val, "=") {
			sub = a.val
			break
		}
	}
	w.spawn(s, c, sub, false, "runs make recipes, which Shoal does not analyze")
}
