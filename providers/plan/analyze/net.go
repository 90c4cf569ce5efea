package analyze

import (
	"bufio"
	"net/url"
	"os"
	"path"
	"strings"

	"github.com/shoal-sh/shoal/core/policy"
)

// net records a network effect; send marks data leaving the machine.
func (w *walker) net(c *cmd, target arg, sub string, force, send bool, reason string) {
	e := Effect{Effect: policy.Effect{Kind: policy.Net, Head: c.head, Sub: sub, Force: force}}
	switch {
	case target.dyn:
		e.Dynamic, e.Target = true, target.text
	default:
		e.Target = target.val
	}
	e.Reversible = !send && !force
	e.Reason = reason
	if e.Reason == "" {
		if send {
			e.Reason = "sends data to another machine; it cannot be called back"
		} else {
			e.Reason = "fetches from the network; nothing changes remotely"
		}
	}
	w.add(e)
}

// hostOf extracts the host from a URL, scp-style user@host:path, or a bare
// host[:port]/path.
func hostOf(s string) string {
	if strings.Contains(s, "://") {
		if u, err := url.Parse(s); err == nil && u.Hostname() != "" {
			return u.Hostname()
		}
	}
	s, _, _ = strings.Cut(s, "/")
	if i := strings.LastIndexByte(s, '@'); i >= 0 {
		s = s[i+1:]
	}
	if strings.HasPrefix(s, "[") {
		if j := strings.IndexByte(s, ']'); j > 0 {
			return s[1:j]
		}
	}
	s, _, _ = strings.Cut(s, ":")
	return s
}

func hostArg(a arg) arg {
	if a.dyn {
		return a
	}
	return arg{val: hostOf(a.val), text: a.text}
}

func hostCmd(w *walker, s *scope, c *cmd) {
	w.spawn(s, c, "", true, modeled)
	p := w.parse(c.args, optSpec{shortVal: "cipstwWqIbexXoOmlT46"})
	if (c.head == "nc" || c.head == "ncat" || c.head == "netcat") && p.has("e", "c", "exec", "sh-exec", "lua-exec") {
		w.opaque(c, c.head+" runs a program for each connection: its effects are known only at run time")
	}
	for _, a := range p.ops {
		if !a.dyn && isNumber(a.val) {
			continue
		}
		w.net(c, hostArg(a), "", false, c.head == "nc" || c.head == "ncat" || c.head == "netcat", "")
		break
	}
}

var curlValOpts = []string{"output", "upload-file", "data", "data-binary", "data-raw", "data-urlencode",
	"data-ascii", "json", "form", "form-string", "request", "header", "user", "user-agent", "referer",
	"cookie", "cookie-jar", "config", "url", "write-out", "max-time", "connect-timeout", "proxy",
	"range", "continue-at", "retry", "dump-header", "resolve", "cacert", "cert", "key", "proxy-user",
	"output-dir", "max-filesize", "limit-rate", "interface", "stderr", "trace", "trace-ascii",
	"netrc-file", "oauth2-bearer", "connect-to", "retry-delay", "retry-max-time", "create-file-mode"}

func curlCmd(w *walker, s *scope, c *cmd) {
	w.spawn(s, c, "", true, modeled)
	p := w.parse(c.args, optSpec{shortVal: "oTdFXHuAebcKwmxrCDEUzyYt", longVal: curlValOpts})
	send := p.has("d", "data", "data-binary", "data-raw", "data-urlencode", "data-ascii", "json", "F", "form", "form-string", "T", "upload-file")
	if m, ok := p.val("X", "request"); ok && (m.dyn || !strings.EqualFold(m.val, "GET") && !strings.EqualFold(m.val, "HEAD")) {
		send = true
	}
	urls := append(p.ops, p.all("url")...)
	for _, u := range urls {
		w.net(c, hostArg(u), "", false, send, "")
	}
	for _, o := range p.all("o", "output") {
		if !o.dyn && o.val == "-" {
			continue
		}
		w.fs(s, o, fsReq{kind: policy.FSWrite, mode: modeTruncate, head: c.head})
	}
	if p.has("O", "remote-name", "remote-name-all") {
		for _, u := range urls {
			w.fs(s, remoteName(u), fsReq{kind: policy.FSWrite, mode: modeTruncate, head: c.head})
		}
	}
	for _, f := range p.all("T", "upload-file", "K", "config") {
		w.fs(s, f, fsReq{kind: policy.FSRead, head: c.head})
	}
	for _, d := range p.all("d", "data", "data-binary", "data-urlencode", "json") {
		if !d.dyn && strings.HasPrefix(d.val, "@") && d.val != "@-" {
			w.fs(s, arg{val: d.val[1:], text: d.text}, fsReq{kind: policy.FSRead, head: c.head})
		}
	}
	for _, f := range p.all("c", "cookie-jar", "D", "dump-header") {
		if !f.dyn && f.val == "-" {
			continue
		}
		w.fs(s, f, fsReq{kind: policy.FSWrite, mode: modeTruncate, head: c.head})
	}
}

// remoteName is the local file curl -O / wget name after a URL's path.
func remoteName(u arg) arg {
	if u.dyn {
		return arg{dyn: true, text: u.text}
	}
	pth := u.val
	if x, err := url.Parse(u.val); err == nil && strings.Contains(u.val, "://") {
		pth = x.Path
	}
	base := path.Base(pth)
	if base == "." || base == "/" || base == "" {
		base = "index.html"
	}
	return arg{val: base, text: u.text}
}

func wgetCmd(w *walker, s *scope, c *cmd) {
	w.spawn(s, c, "", true, modeled)
	p := w.parse(c.args, optSpec{shortVal: "OoaPiUtTwQeBlDI", longVal: []string{"output-document", "output-file",
		"append-output", "directory-prefix", "input-file", "user-agent", "tries", "timeout", "wait", "quota",
		"execute", "base", "level", "domains", "post-data", "post-file", "method", "body-data", "body-file",
		"header", "user", "password", "load-cookies", "save-cookies", "include-directories", "exclude-directories"}})
	send := p.has("post-data", "post-file", "body-data", "body-file")
	if m, ok := p.val("method"); ok && (m.dyn || !strings.EqualFold(m.val, "GET") && !strings.EqualFold(m.val, "HEAD")) {
		send = true
	}
	for _, u := range p.ops {
		w.net(c, hostArg(u), "", false, send, "")
	}
	if o, ok := p.val("O", "output-document"); ok {
		if o.dyn || o.val != "-" {
			w.fs(s, o, fsReq{kind: policy.FSWrite, mode: modeTruncate, head: c.head})
		}
	} else {
		dir := arg{val: ".", text: "."}
		if d, ok := p.val("P", "directory-prefix"); ok {
			dir = d
		}
		for _, u := range p.ops {
			if p.has("r", "recursive", "m", "mirror") {
				w.fs(s, dir, fsReq{kind: policy.FSWrite, mode: modeCreate, head: c.head, recursive: true})
				continue
			}
			// wget never replaces a file by default: it picks name.1.
			w.fs(s, w.destFor(s, dir, remoteName(u), true), fsReq{kind: policy.FSWrite, mode: modeCreate, head: c.head,
				override: true, reversible: true, reason: "downloads to a new file (wget never replaces one unless told)"})
		}
	}
	for _, f := range p.all("o", "output-file", "a", "append-output", "save-cookies") {
		w.fs(s, f, fsReq{kind: policy.FSWrite, mode: modeAppend, head: c.head})
	}
	for _, f := range p.all("i", "input-file", "post-file", "body-file", "load-cookies") {
		w.fs(s, f, fsReq{kind: policy.FSRead, head: c.head})
	}
}

func sshCmd(w *walker, s *scope, c *cmd) {
	w.spawn(s, c, "", true, modeled)
	p := w.parse(c.args, optSpec{shortVal: "bcDEeFIiJLlmOoPpQRSWwB", stopAtOperand: true})
	for _, f := range p.all("i", "F") {
		w.fs(s, f, fsReq{kind: policy.FSRead, head: c.head})
	}
	if sshOptsRun(p.all("o")) || p.has("F") {
		w.opaque(c, "ssh is told to run a local command (ProxyCommand, LocalCommand, a config file): its effects are known only at run time")
	}
	if len(p.rest) == 0 {
		return
	}
	host := hostArg(p.rest[0])
	if len(p.rest) == 1 {
		w.net(c, host, "", false, false, "opens a login session on another machine")
		return
	}
	w.net(c, host, "", false, true, "")
	w.add(Effect{
		Effect:     policy.Effect{Kind: policy.ProcSpawn, Head: c.head, Target: host.val + ": " + joinText(p.rest[1:]), Dynamic: true},
		Reversible: false,
		Reason:     "runs a command on another machine, where Shoal cannot see its effects",
	})
}

// remote reports whether an scp/rsync operand names another machine
// (host:path, user@host:path, rsync://…), and which.
func remote(a arg) (arg, bool) {
	if a.dyn {
		return a, false
	}
	v := a.val
	if strings.HasPrefix(v, "rsync://") || strings.HasPrefix(v, "scp://") {
		return arg{val: hostOf(v), text: a.text}, true
	}
	if strings.HasPrefix(v, "/") || strings.HasPrefix(v, "./") || strings.HasPrefix(v, "~") {
		return a, false
	}
	colon := strings.IndexByte(v, ':')
	if colon <= 0 || strings.Contains(v[:colon], "/") {
		return a, false
	}
	return arg{val: hostOf(v), text: a.text}, true
}

func scpCmd(w *walker, s *scope, c *cmd) {
	w.spawn(s, c, "", true, modeled)
	p := w.parse(c.args, optSpec{shortVal: "cFiJloPSDX"})
	if p.has("S", "F") || sshOptsRun(p.all("o")) {
		w.opaque(c, "scp is told to run another program (-S, ProxyCommand, a config file): its effects are known only at run time")
	}
	copyFiles(w, s, c, p.ops, p.has("r"), false)
}

func rsyncCmd(w *walker, s *scope, c *cmd) {
	w.spawn(s, c, "", true, modeled)
	p := w.parse(c.args, optSpec{shortVal: "eTBfM", longVal: []string{"rsh", "exclude", "include", "exclude-from",
		"include-from", "filter", "files-from", "temp-dir", "backup-dir", "suffix", "chmod", "chown", "rsync-path",
		"log-file", "password-file", "partial-dir", "compare-dest", "copy-dest", "link-dest", "max-size", "min-size",
		"timeout", "bwlimit", "port", "out-format", "info", "debug"}})
	if p.has("e", "rsh", "rsync-path") {
		w.opaque(c, "rsync is told to run another program (-e, --rsh, --rsync-path): its effects are known only at run time")
	}
	del := false
	for f := range p.flags {
		if strings.HasPrefix(f, "delete") || f == "remove-source-files" {
			del = true
		}
	}
	for v := range p.vals {
		if strings.HasPrefix(v, "delete") {
			del = true
		}
	}
	copyFiles(w, s, c, p.ops, p.has("r", "a", "recursive", "archive"), del)
	if p.has("remove-source-files") && len(p.ops) > 1 {
		for _, src := range p.ops[:len(p.ops)-1] {
			if _, isRemote := remote(src); !isRemote {
				w.fs(s, src, fsReq{kind: policy.FSDelete, mode: modeDelete, head: c.head, recursive: true,
					override: true, reversible: true, reason: "moved to " + p.ops[len(p.ops)-1].text + ", not destroyed"})
			}
		}
	}
}

// copyFiles handles scp/rsync operands: sources then a destination, each
// local or remote. del: files at the destination missing from the source
// are deleted (rsync --delete).
func copyFiles(w *walker, s *scope, c *cmd, ops []arg, rec, del bool) {
	if len(ops) < 2 {
		for _, a := range ops {
			if h, ok := remote(a); ok {
				w.net(c, h, "", false, false, "")
			}
		}
		return
	}
	dest := ops[len(ops)-1]
	destHost, destRemote := remote(dest)
	for _, src := range ops[:len(ops)-1] {
		if h, ok := remote(src); ok {
			w.net(c, h, "", false, false, "")
		} else {
			w.fs(s, src, fsReq{kind: policy.FSRead, head: c.head, recursive: rec})
		}
	}
	if destRemote {
		reason := ""
		if del {
			reason = "copies to another machine and deletes files there that the source lacks"
		}
		w.net(c, destHost, "", del, true, reason)
		return
	}
	mode := modeTruncate
	if rec {
		mode = modeTree
	}
	w.fs(s, dest, fsReq{kind: policy.FSWrite, mode: mode, head: c.head, recursive: rec})
	if rec {
		defer w.madeLink(s, dest, c.head)
	}
	if del {
		w.fs(s, dest, fsReq{kind: policy.FSDelete, mode: modeDelete, head: c.head, recursive: true})
	}
}

// remoteURL finds a git remote's URL in the repository config, read-only.
func remoteURL(repo, name string) string {
	f, err := os.Open(path.Join(repo, ".git", "config"))
	if err != nil {
		return ""
	}
	defer f.Close()
	want := `[remote "` + name + `"]`
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		l := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(l, "[") {
			in = l == want
			continue
		}
		if in {
			if k, v, ok := strings.Cut(l, "="); ok && strings.TrimSpace(k) == "url" {
				return strings.TrimSpace(v)
			}
		}
	}
	return ""
}
