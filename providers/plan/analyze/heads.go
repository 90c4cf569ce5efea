package analyze

import (
	"os"
	"path"
	"path/filepath"
	"strings"

	"mvdan.cc/sh/v3/syntax"

	"github.com/shoal-sh/shoal/core/policy"
)

// cmd is one command after expansion.
type cmd struct {
	name string // as expanded: rm, /bin/rm, ./build.sh
	head string // base name: rm
	args []arg  // after the name
}

type handler func(w *walker, s *scope, c *cmd)

// builtins run inside the shell (bash's and Shoal's own): no process.
var builtins map[string]handler

// externals are programs the analyzer models; anything else is an
// unknown program.
var externals map[string]handler

func init() {
	quiet := func(*walker, *scope, *cmd) {}
	builtins = map[string]handler{
		"cd": cdCmd, "pushd": cdCmd, "popd": popdCmd,
		"eval": evalCmd, "source": sourceCmd, ".": sourceCmd,
		"exec": execCmd, "command": commandCmd, "builtin": builtinCmd,
		"trap": trapCmd, "unset": unsetCmd, "read": readCmd, "readarray": readCmd, "mapfile": readCmd,
		"printf": printfCmd, "export": declCmd, "declare": declCmd, "typeset": declCmd,
		"readonly": declCmd, "local": declCmd, "set": setCmd, "shift": shiftCmd,
		"getopts": readCmd, "time": wrapperCmd(optSpec{stopAtOperand: true}, 0),
		"kill": killCmd, "alias": aliasCmd, "hash": hashCmd, "shopt": shoptCmd,
		// Shoal's builtins (DESIGN: evaluator builtins).
		"ls": readsCmd(optSpec{}), "open": readsCmd(optSpec{}), "from": quiet, "to": quiet, "out": quiet,
		"jq":   patternFirstCmd(optSpec{shortVal: "f", longVal: []string{"arg", "argjson", "slurpfile", "rawfile", "indent", "from-file"}}, "f", "from-file"),
		"emit": emitCmd, "recv": quiet, // recv reads the bus, which no effect kind covers
	}
	for _, n := range []string{"echo", "true", "false", ":", "test", "[", "pwd", "type",
		"help", "let", "unalias", "wait", "jobs", "fg", "bg", "disown",
		"return", "exit", "break", "continue", "umask", "ulimit", "times", "dirs", "caller",
		"enable", "logout", "suspend", "complete", "compgen", "compopt", "history", "fc"} {
		builtins[n] = quiet
	}

	externals = map[string]handler{
		"rm": rmCmd, "unlink": rmCmd, "rmdir": rmdirCmd,
		"mv": mvCmd, "cp": cpCmd, "install": cpCmd, "ln": lnCmd,
		"chmod": metaCmd(1), "chown": metaCmd(1), "chgrp": metaCmd(1), "touch": touchCmd,
		"mkdir": mkdirCmd, "tee": teeCmd, "dd": ddCmd, "truncate": truncateCmd,
		"shred": shredCmd, "sed": sedCmd, "find": findCmd, "xargs": xargsCmd,
		"tar": tarCmd, "unzip": unzipCmd,
		"git":  gitCmd,
		"curl": curlCmd, "wget": wgetCmd, "ssh": sshCmd, "scp": scpCmd, "rsync": rsyncCmd,
		"nc": hostCmd, "ncat": hostCmd, "netcat": hostCmd, "telnet": hostCmd,
		"ping": hostCmd, "dig": hostCmd, "nslookup": hostCmd, "host": hostCmd, "traceroute": hostCmd,
		"sudo": sudoCmd, "doas": sudoCmd,
		"env":     envCmd,
		"nice":    wrapperCmd(optSpec{shortVal: "n", longVal: []string{"adjustment"}, stopAtOperand: true}, 0),
		"timeout": wrapperCmd(optSpec{shortVal: "sk", longVal: []string{"signal", "kill-after"}, stopAtOperand: true}, 1),
		"nohup":   wrapperCmd(optSpec{stopAtOperand: true}, 0),
		"setsid":  wrapperCmd(optSpec{stopAtOperand: true}, 0),
		"stdbuf":  wrapperCmd(optSpec{shortVal: "ioe", longVal: []string{"input", "output", "error"}, stopAtOperand: true}, 0),
		"ionice":  wrapperCmd(optSpec{shortVal: "cnp", longVal: []string{"class", "classdata", "pid"}, stopAtOperand: true}, 0),
		"time":    wrapperCmd(optSpec{shortVal: "fo", longVal: []string{"format", "output"}, stopAtOperand: true}, 0),
		"flock":   flockCmd, "watch": watchCmd,
		"sh": shellCmd, "bash": shellCmd, "zsh": shellCmd, "dash": shellCmd, "ksh": shellCmd,
		"ash": shellCmd, "mksh": shellCmd, "busybox": busyboxCmd,
		"python": interpCmd, "python3": interpCmd, "python2": interpCmd, "perl": interpCmd,
		"ruby": interpCmd, "node": interpCmd, "nodejs": interpCmd, "php": interpCmd,
		"lua": interpCmd, "deno": interpCmd, "bun": interpCmd, "osascript": interpCmd, "Rscript": interpCmd,
		"npx": fetchRunCmd, "pnpx": fetchRunCmd, "bunx": fetchRunCmd, "uvx": fetchRunCmd,
		"npm": pkgCmd, "pnpm": pkgCmd, "yarn": pkgCmd, "pip": pkgCmd, "pip3": pkgCmd, "pipx": pkgCmd,
		"uv": pkgCmd, "gem": pkgCmd, "cargo": pkgCmd, "go": pkgCmd, "apt": pkgCmd, "apt-get": pkgCmd,
		"dnf": pkgCmd, "yum": pkgCmd, "brew": pkgCmd, "apk": pkgCmd, "snap": pkgCmd,
		"bundle": pkgCmd, "composer": pkgCmd,
		"docker": clusterCmd, "podman": clusterCmd, "kubectl": clusterCmd, "helm": clusterCmd,
		"make": makeCmd, "kill": killCmd, "pkill": killCmd, "killall": killCmd, "killall5": killCmd,
		"link": linkCmd, "systemctl": systemctlCmd, "crontab": crontabCmd,
		"awk": awkCmd, "gawk": awkCmd, "mawk": awkCmd, "nawk": awkCmd,
		"mkfs": deviceCmd, "mke2fs": deviceCmd, "mkswap": deviceCmd, "wipefs": deviceCmd,
		"fdisk": deviceCmd, "sfdisk": deviceCmd, "parted": deviceCmd,
		"grep":  patternFirstCmd(optSpec{shortVal: "efmABCd", longVal: []string{"regexp", "file", "max-count", "after-context", "before-context", "context", "include", "exclude", "exclude-dir"}}, "e", "regexp", "f", "file"),
		"egrep": patternFirstCmd(optSpec{shortVal: "efmABC"}, "e", "f"),
		"fgrep": patternFirstCmd(optSpec{shortVal: "efmABC"}, "e", "f"),
		"rg":    patternFirstCmd(optSpec{shortVal: "efgtTmABCM", longVal: []string{"regexp", "file", "glob", "type", "type-not", "max-count"}}, "e", "regexp", "f", "file"),
		"jq":    patternFirstCmd(optSpec{shortVal: "f", longVal: []string{"arg", "argjson", "slurpfile", "rawfile", "indent", "from-file"}}, "f", "from-file"),
		"sort":  sortCmd,
	}
	power := machineCmd("stops or restarts the whole machine")
	for _, n := range []string{"reboot", "shutdown", "poweroff", "halt", "init", "telinit", "kexec"} {
		externals[n] = power
	}
	for _, n := range []string{"passwd", "chpasswd", "usermod", "useradd", "userdel", "adduser", "deluser",
		"groupadd", "groupdel", "groupmod", "gpasswd", "chage", "chsh", "chfn", "vipw", "vigr", "newusers"} {
		externals[n] = machineCmd("changes the machine's accounts or passwords")
	}
	for _, n := range []string{"blkdiscard", "sgdisk", "cfdisk", "hdparm", "nvme", "sg_format", "cryptsetup",
		"dmsetup", "mdadm", "lvremove", "vgremove", "pvremove", "zpool", "losetup"} {
		externals[n] = machineCmd("changes block devices directly; what was on them may be gone")
	}
	for _, n := range []string{"mount", "umount", "swapon", "swapoff", "sysctl", "modprobe", "insmod", "rmmod",
		"chroot", "nsenter", "setcap"} {
		externals[n] = machineCmd("changes the machine's mounts, kernel or process isolation")
	}
	for _, n := range []string{"at", "batch", "systemd-run", "launchctl", "service"} {
		externals[n] = machineCmd("hands a command to a daemon that runs it outside the session and its confinement")
	}
	for _, n := range []string{"iptables", "ip6tables", "iptables-legacy", "iptables-nft", "ip6tables-legacy",
		"ip6tables-nft", "ebtables", "arptables"} {
		externals[n] = readsUnless("changes the machine's firewall", "-L", "--list", "-S", "--list-rules", "-n",
			"--numeric", "-v", "--verbose", "-x", "--exact", "--line-numbers", "-t", "filter", "nat", "mangle", "raw", "security", "INPUT", "OUTPUT", "FORWARD")
	}
	externals["iptables-restore"] = machineCmd("changes the machine's firewall")
	externals["ip6tables-restore"] = machineCmd("changes the machine's firewall")
	externals["iptables-save"] = harmlessCmd
	externals["nft"] = readsUnless("changes the machine's firewall", "list", "-a", "--handle", "-n", "-s", "--stateless",
		"ruleset", "tables", "table", "chains", "chain", "sets", "inet", "ip", "ip6", "filter", "-j", "--json")
	externals["ufw"] = readsUnless("changes the machine's firewall", "status", "verbose", "numbered", "version", "show", "app", "list")
	externals["firewall-cmd"] = readsUnless("changes the machine's firewall", "--state", "--list-*", "--get-*", "--query-*", "--info-*")
	for _, n := range []string{"vi", "vim", "nvim", "view", "vimdiff", "gvim", "ex", "ed", "red", "emacs",
		"emacsclient", "nano", "pico", "joe", "micro", "kak", "hx", "mcedit"} {
		externals[n] = editorCmd
	}
	for _, n := range []string{"csh", "tcsh", "fish", "pwsh", "powershell", "tclsh", "wish", "expect", "gdb", "jshell"} {
		externals[n] = interpCmd
	}
	for _, n := range []string{"cat", "head", "tail", "less", "more", "wc", "stat", "file", "du",
		"tree", "md5sum", "sha1sum", "sha256sum", "sha512sum", "b3sum", "cksum", "xxd", "od",
		"hexdump", "strings", "nl", "tac", "rev", "diff", "cmp", "base64", "realpath", "readlink",
		"ls", "open", "uniq", "cut", "paste", "column", "fold", "fmt", "comm", "join", "look", "bat"} {
		externals[n] = readsCmd(optSpec{shortVal: "nckdw", longVal: []string{"lines", "bytes", "max-depth"}})
	}
	for _, n := range []string{"echo", "printf", "true", "false", "test", "[", "pwd", "sleep", "date",
		"whoami", "id", "uname", "hostname", "seq", "yes", "expr", "tput", "clear", "basename",
		"dirname", "printenv", "which", "whereis", "tr", "tty", "nproc", "uptime", "ps", "df",
		"free", "env", "getconf", "locale", "groups", "arch", "cal", "bc", "dc", "sum", "factor"} {
		if _, ok := externals[n]; !ok {
			externals[n] = harmlessCmd
		}
	}
}

func (w *walker) call(s *scope, ce *syntax.CallExpr) {
	if len(ce.Args) == 0 {
		// Plain assignments set shell variables that persist in the session.
		for _, as := range ce.Assigns {
			w.setVar(s, as.Name.Value, w.assignValue(s, as))
			w.envWrite("", as.Name.Value)
		}
		return
	}
	t := s
	for _, as := range ce.Assigns {
		// Prefix assignments (X=1 cmd) only reach the command's
		// environment; PATH among them changes which program runs.
		if as.Value != nil {
			w.substs(s, as.Value)
		}
		if as.Array != nil {
			w.substs(s, as.Array)
		}
		if r, ok := codeVars[as.Name.Value]; ok && as.Value != nil {
			// An empty value (ENV= sh) turns the feature off.
			if v, known := w.literal(s, as.Value); !known || v != "" {
				w.codeVar(as.Name.Value, r)
			}
		}
		if as.Name.Value == "PATH" {
			if t == s {
				t = s.clone()
			}
			t.vars["PATH"] = w.assignValue(s, as)
			t.pathSet = true
		}
	}
	var args []arg
	for _, word := range ce.Args {
		args = append(args, w.fields(s, word)...)
	}
	if t != s {
		// The command runs with the new PATH; the shell keeps its own
		// (but a builtin's cd stays).
		w.run(t, args, true)
		s.cwd, s.cwdKnown = t.cwd, t.cwdKnown
		return
	}
	w.run(s, args, true)
}

// run analyzes one command given as expanded fields. lookupFuncs is false
// when the command cannot be a shell function or builtin (it runs through
// exec(2): sudo, env, xargs, find -exec).
func (w *walker) run(s *scope, args []arg, shellLevel bool) {
	if len(args) == 0 {
		return
	}
	h := args[0]
	if h.dyn {
		w.dynamicSpawn("", h.text, "the command itself is known only at run time")
		return
	}
	if h.val == "" {
		return
	}
	c := &cmd{name: h.val, head: path.Base(h.val), args: args[1:]}
	if !strings.Contains(c.name, "/") {
		if shellLevel {
			if body, ok := w.funcs[c.name]; ok {
				w.heads = uniqueAppend(w.heads, c.name)
				w.callFunc(s, c.name, body, c.args)
				return
			}
			if w.env.Func != nil {
				if body, ok := w.env.Func(c.name); ok && body != nil {
					w.heads = uniqueAppend(w.heads, c.name)
					w.callFunc(s, c.name, body, c.args)
					return
				}
			}
			if b, ok := builtins[c.name]; ok {
				w.heads = uniqueAppend(w.heads, c.name)
				b(w, s, c)
				return
			}
		}
	}
	w.heads = uniqueAppend(w.heads, c.head)
	if !strings.Contains(c.name, "/") && !w.light {
		if why, ok := w.shadowed(s, c.name); ok {
			w.spawn(s, c, "", false, why)
			w.dynamicSpawn(c.head, c.name, why)
			return
		}
	}
	if strings.HasPrefix(c.head, "mkfs.") {
		deviceCmd(w, s, c)
		return
	}
	if x, ok := externals[c.head]; ok {
		x(w, s, c)
		return
	}
	w.unknown(s, c)
}

// spawn records the process a command starts.
func (w *walker) spawn(s *scope, c *cmd, sub string, reversible bool, reason string) {
	target := c.name
	if strings.Contains(target, "/") && !path.IsAbs(target) && s.cwdKnown {
		target = path.Join(s.cwd, target)
	}
	w.add(Effect{
		Effect:     policy.Effect{Kind: policy.ProcSpawn, Target: target, Head: c.head, Sub: sub},
		Reversible: reversible,
		Reason:     reason,
	})
}

const modeled = "runs a program whose effects are listed separately"

// unknown is a program the analyzer does not model. A shell script run by
// path is read and analyzed; anything else is a plain spawn whose effects
// are not known.
func (w *walker) unknown(s *scope, c *cmd) {
	if w.light {
		w.spawn(s, c, "", false, "runs a program Shoal does not model; what it does is not known")
		return
	}
	if strings.Contains(c.name, "/") {
		if p, ok := w.abs(s, arg{val: c.name}); ok && isShellScript(p) {
			w.spawn(s, c, "", true, modeled)
			w.script(s, p, c.head, c.args)
			return
		}
	}
	if !strings.Contains(c.name, "/") && w.env.Func == nil && !w.onPath(c.name) {
		// Without the session's function table a name that is no program
		// may be a function or alias defined by an earlier execution:
		// its body is unknown here.
		w.spawn(s, c, "", false, "not a program on PATH")
		w.dynamicSpawn(c.head, c.name, "not a program on PATH: a function or alias defined earlier in the session (or a typo); what it does is not known")
		return
	}
	w.spawn(s, c, "", false, "runs a program Shoal does not model; what it does is not known")
}

// onPath reports whether name is an executable file in a PATH directory
// (the session's PATH when known), read-only and cached.
func (w *walker) onPath(name string) bool {
	if ok, seen := w.path[name]; seen {
		return ok
	}
	pathVar, ok := "", false
	if w.env.Lookup != nil {
		pathVar, ok = w.env.Lookup("PATH")
	}
	if !ok {
		pathVar = os.Getenv("PATH")
	}
	found := false
	for _, dir := range filepath.SplitList(pathVar) {
		if dir == "" {
			dir = "."
		}
		if !filepath.IsAbs(dir) && w.env.Cwd != "" {
			dir = filepath.Join(w.env.Cwd, dir)
		}
		if info, err := os.Stat(filepath.Join(dir, name)); err == nil && info.Mode().IsRegular() && info.Mode()&0o111 != 0 {
			found = true
			break
		}
	}
	if w.path == nil {
		w.path = map[string]bool{}
	}
	w.path[name] = found
	return found
}

// harmlessCmd is a program that only prints.
func harmlessCmd(w *walker, s *scope, c *cmd) {
	w.spawn(s, c, "", true, "prints; changes nothing")
}

// isShellScript reports a readable text file with a shell #! line.
func isShellScript(p string) bool {
	f, err := os.Open(p)
	if err != nil {
		return false
	}
	defer f.Close()
	buf := make([]byte, 128)
	n, _ := f.Read(buf)
	line, _, _ := strings.Cut(string(buf[:n]), "\n")
	if !strings.HasPrefix(line, "#!") {
		return false
	}
	fields := strings.Fields(line[2:])
	if len(fields) == 0 {
		return false
	}
	interp := path.Base(fields[0])
	if interp == "env" && len(fields) > 1 {
		interp = fields[1]
	}
	switch interp {
	case "sh", "bash", "dash", "zsh", "ksh", "ash", "mksh":
		return true
	}
	return false
}

// script reads a script file (read-only) and analyzes it as a child shell.
func (w *walker) script(s *scope, p, head string, params []arg) {
	w.fs(s, arg{val: p, text: p}, fsReq{kind: policy.FSRead, head: head, executes: true})
	if w.light {
		// A run records the process; reading the script is the plan's
		// business.
		return
	}
	data, ok := readScript(p)
	if !ok {
		w.dynamicSpawn(head, p, "runs a script that cannot be read now; its commands are not known")
		return
	}
	w.source(s, data, head, p, false, params)
}

func readScript(p string) (string, bool) {
	info, err := os.Stat(p)
	if err != nil || !info.Mode().IsRegular() || info.Size() > maxScript {
		return "", false
	}
	data, err := os.ReadFile(p)
	if err != nil {
		return "", false
	}
	return string(data), true
}
