package analyze

import (
	"os"
	"path"
	"slices"
	"strings"

	"github.com/shoal-sh/shoal/core/policy"
)

// repoRoot finds the work tree holding dir (read-only), or dir itself.
func (w *walker) repoRoot(dir string) string {
	if r, ok := w.roots[dir]; ok {
		return r
	}
	r := dir
	for d := dir; ; d = path.Dir(d) {
		if _, err := os.Lstat(path.Join(d, ".git")); err == nil {
			r = d
			break
		}
		if d == "/" || d == "." {
			break
		}
	}
	if w.roots == nil {
		w.roots = map[string]string{}
	}
	w.roots[dir] = r
	return r
}

func gitCmd(w *walker, s *scope, c *cmd) {
	p := w.parse(c.args, optSpec{shortVal: "Cc", longVal: []string{"git-dir", "work-tree", "namespace", "config-env", "exec-path"}, stopAtOperand: true})
	gs := s
	if dirs := p.all("C"); len(dirs) > 0 {
		gs = s.clone()
		for _, d := range dirs {
			if abs, ok := w.abs(gs, d); ok {
				gs.cwd = abs
			} else {
				gs.cwdKnown = false
			}
		}
	}
	if len(p.rest) == 0 {
		w.spawn(s, c, "", true, modeled)
		return
	}
	if p.rest[0].dyn {
		w.spawn(s, c, "", true, modeled)
		w.dynamicSpawn("git", joinText(p.rest), "the git subcommand is known only at run time")
		return
	}
	sub := p.rest[0].val
	args := p.rest[1:]
	w.spawn(s, c, sub, true, modeled)
	gitRunsCommands(w, c, p, sub, args)

	g := gitRun{w: w, gs: gs, c: c, sub: sub, repo: arg{dyn: true, text: "(repository)"}}
	g.gitDir = g.repo
	if gs.cwdKnown {
		root := w.repoRoot(gs.cwd)
		g.repo = arg{val: root, text: root}
		g.gitDir = arg{val: path.Join(root, ".git"), text: path.Join(root, ".git")}
		if slices.Contains(gitRunsHooks, sub) {
			if _, linked := w.linkedAt(g.gitDir.val); !w.light && (linked || gitHooks(root) || w.wroteBelow(g.gitDir.val)) {
				w.opaque(c, "git "+sub+" runs the repository's hooks (.git/hooks), whose commands Shoal does not see")
			}
		}
	}
	if slices.Contains([]string{"checkout", "switch", "reset", "pull", "merge", "rebase", "stash", "cherry-pick",
		"revert", "am", "apply", "restore", "worktree", "submodule"}, sub) {
		// What is checked out may hold symbolic links.
		defer w.madeLink(gs, g.repo, "git "+sub)
	}
	g.effects(args)
}

// gitRunsCommands marks the run opaque when git's configuration or a
// subcommand's options run commands the planner does not see.
func gitRunsCommands(w *walker, c *cmd, p parsed, sub string, args []arg) {
	if gitConfigRuns(p.all("c")) || p.has("config-env", "exec-path") {
		w.opaque(c, "git -c sets configuration that may run commands (alias.x=!…, core.pager, core.sshCommand, a filter): what runs is known only at run time")
	}
	for _, o := range gitRunOpts[sub] {
		if slices.ContainsFunc(args, func(a arg) bool {
			return !a.dyn && (a.val == o || strings.HasPrefix(a.val, o+"=") || len(o) == 2 && strings.HasPrefix(a.val, o))
		}) {
			w.opaque(c, "git "+sub+" "+o+" runs a command given on the command line: its effects are known only at run time")
			break
		}
	}
	if (sub == "bisect" && len(args) > 0 && args[0].val == "run") || sub == "filter-branch" ||
		(sub == "submodule" && slices.ContainsFunc(args, func(a arg) bool { return a.val == "foreach" })) ||
		sub == "difftool" || sub == "mergetool" {
		w.opaque(c, "git "+sub+" runs commands Shoal does not see: their effects are known only at run time")
	}
}

// gitRun is one git subcommand being planned: where it runs (gs), its
// work tree (repo) and its .git directory, either dynamic when the
// directory is not known.
type gitRun struct {
	w            *walker
	gs           *scope
	c            *cmd
	sub          string
	repo, gitDir arg
}

// write records a write by the subcommand to target.
func (g gitRun) write(target arg, r fsReq) {
	r.kind, r.head, r.sub = policy.FSWrite, "git", g.sub
	g.w.fs(g.gs, target, r)
}

// fs records an effect of the subcommand on target.
func (g gitRun) fs(target arg, r fsReq) {
	r.head, r.sub = "git", g.sub
	g.w.fs(g.gs, target, r)
}

// gitKeep is a change git can take back (the reflog or a commit keeps it).
func gitKeep(reason string) fsReq {
	return fsReq{mode: modeModify, override: true, reversible: true, reason: reason}
}

// gitLose is a change to the whole tree that nothing keeps a copy of.
func gitLose(reason string, force bool) fsReq {
	return fsReq{mode: modeTree, recursive: true, force: force, override: true, reversible: false, reason: reason}
}

// effects records what the subcommand does to files and the network.
func (g gitRun) effects(args []arg) {
	w, c, sub, repo, gitDir := g.w, g.c, g.sub, g.repo, g.gitDir
	switch sub {
	case "push":
		gitPush(w, g.gs, c, repo, args)
	case "pull":
		w.net(c, gitRemote(repo, args), sub, false, false, "")
		g.write(repo, gitKeep("merges fetched commits; the reflog keeps the old head"))
	case "fetch":
		w.net(c, gitRemote(repo, args), sub, false, false, "")
		g.write(gitDir, gitKeep("updates remote-tracking refs only"))
	case "clone":
		g.clone(args)
	case "commit":
		g.write(gitDir, gitKeep("adds a commit; git reset HEAD~ takes it back"))
	case "reset":
		q := w.parse(args, optSpec{})
		if q.has("hard", "merge", "keep") {
			g.write(repo, gitLose("discards uncommitted changes in the work tree; git has no copy of them", true))
		} else {
			g.write(gitDir, gitKeep("moves the branch head; the reflog keeps the old one"))
		}
	case "clean":
		g.clean(args)
	case "checkout", "restore", "switch":
		g.checkout(args)
	case "rebase", "merge", "cherry-pick", "revert", "am", "apply", "stash", "add", "mv", "init",
		"tag", "notes", "submodule", "worktree", "config", "remote", "branch", "bisect", "switch-branch":
		g.change(args)
	case "rm":
		q := w.parse(args, optSpec{})
		if q.has("cached") {
			g.write(gitDir, gitKeep("changes the index only"))
			return
		}
		for _, t := range q.ops {
			g.fs(t, fsReq{kind: policy.FSDelete, mode: modeDelete,
				recursive: q.has("r"), force: q.has("f", "force"),
				override: true, reversible: true, reason: "the last commit still holds it"})
		}
	case "gc", "prune", "reflog", "filter-branch", "filter-repo", "replace":
		q := w.parse(args, optSpec{})
		if sub == "reflog" && (len(q.ops) == 0 || q.ops[0].dyn || (q.ops[0].val != "expire" && q.ops[0].val != "delete")) {
			g.fs(gitDir, fsReq{kind: policy.FSRead})
			return
		}
		g.write(gitDir, fsReq{mode: modeTree, recursive: true, force: true, override: true, reversible: false,
			reason: "discards unreachable history for good"})
	case "status", "log", "diff", "show", "blame", "grep", "ls-files", "ls-tree", "rev-parse", "describe",
		"shortlog", "cat-file", "rev-list", "show-ref", "for-each-ref", "whatchanged", "version", "help":
		g.fs(repo, fsReq{kind: policy.FSRead})
	default:
		// An unknown subcommand (or an alias): treat as a change to the
		// repository, whose commands are not known.
		g.write(repo, fsReq{mode: modeModify, override: true, reversible: false, reason: "a git subcommand Shoal does not model"})
		w.opaque(c, "git "+sub+" is not a subcommand Shoal models: it may be an alias (alias.x=!…) that runs any command")
	}
}

// clone reaches the remote and creates the destination directory.
func (g gitRun) clone(args []arg) {
	q := g.w.parse(args, optSpec{shortVal: "obcju", longVal: []string{"origin", "branch", "config", "depth", "reference", "separate-git-dir", "template", "upload-pack", "jobs", "filter"}})
	if len(q.ops) == 0 {
		return
	}
	g.w.net(g.c, hostArg(q.ops[0]), g.sub, false, false, "")
	dest := arg{}
	if len(q.ops) > 1 {
		dest = q.ops[1]
	} else if q.ops[0].dyn {
		dest = arg{dyn: true, text: q.ops[0].text}
	} else {
		name := strings.TrimSuffix(path.Base(strings.TrimSuffix(q.ops[0].val, "/")), ".git")
		dest = arg{val: name, text: name}
	}
	g.fs(dest, fsReq{kind: policy.FSWrite, mode: modeCreate, recursive: true})
	g.w.madeLink(g.gs, dest, "git clone")
}

// clean deletes untracked files, unless it is a dry run (or not forced,
// when git refuses).
func (g gitRun) clean(args []arg) {
	q := g.w.parse(args, optSpec{shortVal: "eq"})
	if q.has("n", "dry-run") || !q.has("f", "force") {
		g.fs(g.repo, fsReq{kind: policy.FSRead})
		return
	}
	targets := q.ops
	if len(targets) == 0 {
		targets = []arg{g.repo}
	}
	for _, t := range targets {
		g.fs(t, fsReq{kind: policy.FSDelete, mode: modeDelete,
			recursive: q.has("d") || q.has("x"), force: true,
			override: true, reversible: false, reason: "deletes untracked files; git has no copy of them"})
	}
}

// checkout covers checkout, restore and switch: restoring paths loses
// their uncommitted changes; switching branches does only when forced.
func (g gitRun) checkout(args []arg) {
	sub := g.sub
	q := g.w.parse(args, optSpec{shortVal: "bBs", longVal: []string{"source", "orphan", "conflict", "pathspec-from-file"}})
	var paths []arg
	dashdash := false
	for i, a := range args {
		if !a.dyn && a.val == "--" {
			dashdash, paths = true, args[i+1:]
			break
		}
	}
	if sub == "restore" {
		paths = q.ops
	}
	switch {
	case sub == "restore" || (sub == "checkout" && dashdash):
		if sub == "restore" && q.has("staged", "S") && !q.has("worktree", "W") {
			g.write(g.gitDir, gitKeep("changes the index only"))
			return
		}
		for _, pth := range paths {
			g.write(pth, fsReq{mode: modeTruncate, override: true, reversible: false,
				reason: "replaces the file with the committed version; uncommitted changes are lost"})
		}
	case q.has("f", "force", "discard-changes"):
		g.write(g.repo, gitLose("switches branches discarding uncommitted changes", true))
	default:
		g.write(g.repo, gitKeep("switches branches; git refuses to lose uncommitted changes"))
	}
}

// change covers the subcommands that change history, the index or the
// repository's metadata.
func (g gitRun) change(args []arg) {
	sub := g.sub
	q := g.w.parse(args, optSpec{shortVal: "mFcCe", longVal: []string{"message", "file"}})
	switch {
	case sub == "stash" && len(q.ops) > 0 && !q.ops[0].dyn && (q.ops[0].val == "drop" || q.ops[0].val == "clear"):
		g.write(g.gitDir, fsReq{mode: modeModify, force: true, override: true, reversible: false, reason: "drops stashed changes"})
	case sub == "branch" && q.has("D") || (sub == "branch" && q.has("d", "delete") && q.has("f", "force")):
		g.write(g.gitDir, fsReq{mode: modeModify, force: true, override: true, reversible: false, reason: "deletes a branch even if unmerged"})
	case sub == "add" || sub == "init" || sub == "config" || sub == "remote" || sub == "tag" || sub == "notes" || sub == "branch":
		g.write(g.gitDir, gitKeep("changes repository metadata; it can be set back"))
	default:
		g.write(g.repo, gitKeep("rewrites the work tree from history; the reflog keeps the old head"))
	}
}

// gitRunOpts are, per subcommand, the options that name a command to run.
var gitRunOpts = map[string][]string{
	"clone":     {"--upload-pack", "-u", "--config", "-c", "--template"},
	"fetch":     {"--upload-pack"},
	"pull":      {"--upload-pack"},
	"ls-remote": {"--upload-pack"},
	"archive":   {"--exec"},
	"push":      {"--receive-pack", "--exec"},
	"rebase":    {"--exec", "-x"},
}

// gitRemote is the host (or name) of the remote a push/pull/fetch names.
func gitRemote(repo arg, args []arg) arg {
	q := parseOpts(args, optSpec{shortVal: "oj", longVal: []string{"repo", "receive-pack", "exec", "push-option", "jobs", "depth", "upload-pack"}})
	name := arg{val: "origin", text: "origin"}
	if len(q.ops) > 0 {
		name = q.ops[0]
	}
	if r, ok := q.val("repo"); ok {
		name = r
	}
	if name.dyn {
		return name
	}
	if strings.Contains(name.val, "://") || strings.Contains(name.val, "@") || strings.Contains(name.val, ":") {
		return hostArg(name)
	}
	if !repo.dyn {
		if u := remoteURL(repo.val, name.val); u != "" {
			return arg{val: hostOf(u), text: name.text}
		}
	}
	return name
}

func gitPush(w *walker, s *scope, c *cmd, repo arg, args []arg) {
	q := w.parse(args, optSpec{shortVal: "o", longVal: []string{"repo", "receive-pack", "exec", "push-option", "signed"}})
	force := q.has("f", "force", "mirror", "d", "delete", "prune")
	for f := range q.flags {
		if strings.HasPrefix(f, "force-with-lease") || f == "force-if-includes" {
			force = true
		}
	}
	for v := range q.vals {
		if strings.HasPrefix(v, "force-with-lease") {
			force = true
		}
	}
	if len(q.ops) > 1 {
		for _, ref := range q.ops[1:] {
			if !ref.dyn && (strings.HasPrefix(ref.val, "+") || strings.HasPrefix(ref.val, ":")) {
				force = true
			}
		}
	}
	reason := "adds commits to a shared remote; a new commit can revert them"
	if force {
		reason = "rewrites or deletes remote history; others' commits may be lost"
	}
	// A plain push only adds commits: reversible. A forced one is not.
	w.net(c, gitRemote(repo, args), "push", force, false, reason)
}
